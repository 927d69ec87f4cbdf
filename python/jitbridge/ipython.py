"""jitbridge.ipython — the %%cuda_kernel cell magic: a notebook cell's CUDA C++ becomes a RawKernel in the namespace.

    %load_ext jitbridge

    %%cuda_kernel saxpy --arch sm_90 -O -DN=4
    extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) { ... }

binds ``saxpy`` (a jitbridge.RawKernel) in the notebook. Options: ``--arch`` (default: the current GPU's),
``-O``/``--option`` (an NVRTC option, repeatable; ``-O -DN=4`` and ``-O=-DN=4`` both work), ``--name-expression``
(a template instance to compile, repeatable; a NAME such as ``scale<float>`` is one by itself), ``--as VAR`` (the
variable to bind; needed when NAME is not a Python name), ``--quiet`` (no summary line). A compile error raises
jitbridge.CompileError, whose message shows the offending line with a caret. Re-running an unchanged cell is served
by jitbridge's kernel cache (the summary line says where the kernel came from and how long it took).

Loading the extension also shows jitbridge's CompileError (the source line, the error's column highlighted, the NVRTC
log folded) and launch-argument errors (the kernel and the parameter) as HTML above the usual traceback in a
notebook; a terminal IPython shows the plain-text message as before.
"""

import argparse
import shlex
import time

from ._argv import join_option_values

__all__ = ["cuda_kernel_magic", "load_ipython_extension", "MagicArgumentError"]

_TAKES_VALUE = ("-O", "--option", "--arch", "--name-expression", "--as")


class MagicArgumentError(ValueError):
    """The %%cuda_kernel line could not be parsed; the message says how to write it."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        if len(message) > 300:  # argparse quotes the words it rejects, a pasted cell's text included
            message = message[:300] + " [...]"
        raise MagicArgumentError(f"%%cuda_kernel: {message}\nusage: {self.format_usage().partition(': ')[2].strip()}")


def _parser():
    p = _Parser(prog="%%cuda_kernel", add_help=False, allow_abbrev=False)
    p.add_argument("name", help="the kernel (or template instance) to take from the cell")
    p.add_argument("--arch", default=None, help="target, e.g. sm_90 (default: the current GPU's)")
    p.add_argument("-O", "--option", action="append", default=[], dest="options", metavar="OPTION",
                   help="an NVRTC option")
    p.add_argument("--name-expression", action="append", default=[], dest="name_expressions",
                   metavar="EXPR", help="a template instance to compile, e.g. 'scale<float>'")
    p.add_argument("--as", dest="variable", default=None, metavar="VAR",
                   help="bind the kernel to this variable instead of NAME")
    p.add_argument("--quiet", action="store_true", help="print no summary line")
    return p


_MAX_LINE = 16384


def _tokens(line):
    """shlex-split ``line``, joining option values that start with '-' to their option (``-O -DN=4``)."""
    if len(line) > _MAX_LINE:
        # shlex takes minutes on a megabyte (it grows each word a character at a time): a pasted kernel
        # on the magic's line is refused before splitting.
        raise MagicArgumentError(f"%%cuda_kernel: the line is {len(line)} characters long (at most {_MAX_LINE}); "
                                 "it takes the kernel name and options, and the kernel source goes in the cell")
    try:
        words = shlex.split(line)
    except ValueError as e:
        shown = repr(line) if len(line) <= 300 else repr(line[:300]) + " [...]"
        raise MagicArgumentError(f"%%cuda_kernel: cannot split the line {shown}: {e}") from None
    return join_option_values(words, _TAKES_VALUE)


def cuda_kernel_magic(line, cell, namespace):
    """Compiles ``cell`` (CUDA C++) as the kernel named on ``line`` and binds it in ``namespace`` (a dict, e.g. the
    notebook's user namespace); returns the RawKernel. Raises MagicArgumentError for a bad line,
    jitbridge.CompileError when NVRTC rejects the source, KeyError when the cell has no such kernel."""
    from ._kernels import RawKernel

    args = _parser().parse_args(_tokens(line))
    variable = args.variable or args.name
    if not variable.isidentifier():
        raise MagicArgumentError(f"%%cuda_kernel: {args.name[:200]!r} is not a Python name; bind it with --as VAR")
    exprs = list(args.name_expressions)
    if "<" in args.name and args.name not in exprs:
        exprs.append(args.name)
    start = time.perf_counter()
    kernel = RawKernel(cell, args.name, options=args.options, name_expressions=exprs or None, arch=args.arch,
                       program_name=f"{variable}.cu")
    elapsed_ms = (time.perf_counter() - start) * 1e3
    namespace[variable] = kernel
    if not args.quiet:
        origin = {"compiled": "compiled", "memory": "from the memory cache", "disk": "from the disk cache"}
        where = origin.get(kernel.program.origin, kernel.program.origin)
        print(f"{variable} = {args.name}{kernel.signature}: {where} in {elapsed_ms:.2f} ms")
    return kernel


def load_ipython_extension(ipython):
    """``%load_ext jitbridge``: registers the %%cuda_kernel cell magic with this IPython shell."""

    def cuda_kernel(line, cell):
        cuda_kernel_magic(line, cell, ipython.user_ns)

    cuda_kernel.__doc__ = cuda_kernel_magic.__doc__ + "\n" + __doc__
    ipython.register_magic_function(cuda_kernel, magic_kind="cell", magic_name="cuda_kernel")
    # CompileError and launch-argument errors as HTML in a notebook (jitbridge/_richerrors.py).
    from ._richerrors import install

    install(ipython)
