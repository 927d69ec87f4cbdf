"""_argv.py — argument words for argparse, shared by the command line (cli.py) and the %%cuda_kernel magic
(ipython.py)."""


def join_option_values(argv, flags=("--option",)):
    """``--option -std=c++17`` -> ``--option=-std=c++17`` for each flag in ``flags``: argparse would take a value
    starting with '-' for a flag."""
    out = []
    i = 0
    while i < len(argv):
        if argv[i] in flags and i + 1 < len(argv):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out
