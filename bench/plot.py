"""plot.py — PNG figures of the launch and compile comparisons against peers, from the tables the bench scripts
record in a JSON file (JITBRIDGE_BENCH_JSON=path, see _table.record_table):

    JITBRIDGE_BENCH_JSON=/tmp/bench.json python bench/bench_launch.py
    JITBRIDGE_BENCH_JSON=/tmp/bench.json python bench/bench_compile.py
    python bench/plot.py /tmp/bench.json --out docs/figures

writes launch.png (host time per launch: jitbridge with each framework's arrays, its peers, the raw floor),
compile.png (the compile path: cold, disk and memory hits, CuPy and cuda.core) and compile_heavy.png (heavy headers:
five kernels in a row with and without jitbridge's automatic PCH, CuPy, cuda.core), each for the tables the file
has. Needs matplotlib. Without arguments it plots $JITBRIDGE_BENCH_JSON into the JSON's folder, and does nothing
(exit 0) when that variable is unset or matplotlib is missing: scripts/gpu-check runs it after the benches."""
import argparse
import json
import math
import textwrap
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import JSON_FORMAT  # noqa: E402

_TIME = re.compile(r"\s*(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*(ns|us|ms|s)\b")
_NUMBER = re.compile(r"\s*(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")
_TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
JITBRIDGE, PEER, FLOOR = "#1f77b4", "#ff7f0e", "#8c8c8c"


def time_us(cell):
    """Microseconds from a printed time ('12.3 us', '1.50 ms', '2 s', '5.0 ns'), or None ('n/a (...)', '')."""
    m = _TIME.match(str(cell))
    return float(m.group(1)) * _TO_US[m.group(2)] if m else None


def number(cell):
    """The number a cell starts with ('12.34', '1.15x'), or None."""
    m = _NUMBER.match(str(cell))
    return float(m.group(1)) if m else None


def load(path):
    """The tables of a bench JSON file, by key. Raises ValueError naming the file when it is not one."""
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: not a JSON file ({e})")
    if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
        raise ValueError(f"{path}: not a jitbridge bench file (format {JSON_FORMAT!r})")
    return {t["key"]: t for t in data.get("tables", [])}


def _column(table, name):
    try:
        return table["headers"].index(name)
    except ValueError:
        raise ValueError(f"table {table['key']!r}: no column {name!r} (it has {table['headers']})")


def _kind(label):
    """The bar colour of a row: the floor (raw driver calls, NVRTC called directly), a peer, or jitbridge."""
    low = label.lower()
    if low.startswith(("raw ", "floor")) or "nvrtc called directly" in low:
        return FLOOR
    if not low.startswith("jitbridge") and any(p in low for p in ("cupy", "numba", "cuda.core", "triton")):
        return PEER
    return JITBRIDGE


# What each bar colour means, for the legends.
KINDS = ((JITBRIDGE, "jitbridge"), (PEER, "other libraries (CuPy, Numba, cuda.core, Triton)"),
         (FLOOR, "floor: the CUDA driver or NVRTC called directly"))
# The short names ratio cells use for their baseline.
_BASELINES = {"direct": "NVRTC called directly"}
_RATIO = re.compile(r"\s*(\d+(?:\.\d*)?)x(?:\s+(.*))?$")


def ratio_text(cell, baseline=None):
    """A ratio cell as a time ratio: '1.20x' -> '1.20x the time of <baseline>', '96.7x jitbridge (Python)' -> '96.7x
    the time of jitbridge (Python)'; '' for an empty cell, the cell itself when it is no ratio."""
    m = _RATIO.match(str(cell))
    if not m:
        return str(cell).strip()
    of = m.group(2) or baseline
    of = _BASELINES.get(of, of)
    return f"{m.group(1)}x the time of {of}" if of else f"{m.group(1)}x"


def _subtitle(table):
    bits = [b for b in (table.get("device"), table.get("time")) if b]
    return f"\n({', '.join(bits)})" if bits else ""


_PEERS = ("CuPy", "Numba", "cuda.core", "Triton")


def _kinds_legend(fig, colours, labels=()):
    """The colour legend of the bar charts, below the axes (it covers no bar); with the row `labels`, the peers
    and floors named are those the chart shows."""
    from matplotlib.patches import Patch

    text = dict(KINDS)
    if labels:
        low = [label.lower() for label in labels if _kind(label) == PEER]
        peers = [p for p in _PEERS if any(p.lower() in label for label in low)]
        if peers:
            text[PEER] = f"other libraries ({', '.join(peers)})"
        floors = [label.lower() for label in labels if _kind(label) == FLOOR]
        called = [what for what, says in (("the CUDA driver", ("raw ", "floor")), ("NVRTC", ("nvrtc",)))
                  if any(any(w in label for w in says) for label in floors)]
        if called:
            text[FLOOR] = f"floor: {' or '.join(called)} called directly"
    handles = [Patch(color=c, label=text[c]) for c, _ in KINDS if c in colours]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(handles), fontsize=9,
               frameon=False)


def _fit_labels(fig, ax, labels):
    """Widens the x range until every bar's value label ends inside the axes (a long one crossed the frame): a label
    starting at value v, w pixels wide, fits when v sits at most (width - w) pixels into the frame."""
    fig.canvas.draw()
    frame = ax.get_window_extent()
    log = ax.get_xscale() == "log"
    f = math.log10 if log else float
    lo, hi = ax.get_xlim()
    need = f(hi)
    for t in labels:
        room = frame.width - t.get_window_extent().width - 4
        if room > 0:
            need = max(need, f(lo) + (f(t.get_position()[0]) - f(lo)) * frame.width / room)
    if need > f(hi):
        ax.set_xlim(lo, 10 ** need if log else need)


def _bars(plt, rows, title, xlabel, path, log=False):
    """A horizontal bar chart of (label, value, annotation, colour) rows, top to bottom, with a colour legend."""
    fig, ax = plt.subplots(figsize=(12, 0.5 * len(rows) + 2))
    ys = range(len(rows))
    ax.barh(list(ys), [r[1] for r in rows], color=[r[3] for r in rows])
    ax.set_yticks(list(ys))
    ax.set_yticklabels([textwrap.fill(r[0], 48) for r in rows], fontsize=8)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    labels = [ax.text(r[1], y, f" {r[2]}", va="center", fontsize=8) for y, r in zip(ys, rows)]
    ax.set_xlabel("\n".join(textwrap.fill(part, 110) for part in xlabel.split("\n")))
    ax.set_title("\n".join(textwrap.fill(part, 100) for part in title.split("\n")), fontsize=10)
    ax.margins(x=0.35)
    fig.tight_layout()
    _fit_labels(fig, ax, labels)
    _kinds_legend(fig, {r[3] for r in rows}, [r[0] for r in rows])
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_launch(plt, table, out):
    """launch.png from the 'launch_host' table: net host microseconds per launch, each labelled with its time and
    its time ratio to the raw cuLaunchKernel loop (the table's first row)."""
    us, ratio = _column(table, "net us"), _column(table, "net vs raw")
    rows = [(r[0], number(r[us]), f"{number(r[us]):.2f} µs ({ratio_text(r[ratio], 'the baseline')})", _kind(r[0]))
            for r in table["rows"] if number(r[us]) is not None]
    if not rows:
        raise ValueError("table 'launch_host': no row has a number")
    return _bars(plt, rows, "Host time per launch of one small kernel (grid 1 x block 32), lower is better\n"
                 "baseline: raw cuLaunchKernel from a C++ loop (the first bar); each label: the time, and how many "
                 "times the baseline's time it is" + _subtitle(table),
                 "host time per launch, µs (the Python loop's own cost taken off)", os.path.join(out, "launch.png"))


def _compile_group(label):
    """0: cold compiles, 1: a fresh process (disk cache hits, CuPy, cuda.core), 2: again in the same process."""
    low = label.lower()
    return 0 if low.startswith("cold") else 1 if "fresh process" in low else 2


def plot_compile(plt, table, out):
    """compile.png from the 'compile_path' table: each measurement's time (log scale), the fresh-process rows of
    jitbridge, CuPy and cuda.core side by side."""
    t, ratio = _column(table, "time"), _column(table, "ratio")
    rows = [(r[0], time_us(r[t]), f"{r[t].replace('us', 'µs')}  {ratio_text(r[ratio])}".strip(), _kind(r[0]))
            for r in table["rows"] if time_us(r[t]) is not None]
    if not rows:
        raise ValueError("table 'compile_path': no row has a time")
    rows.sort(key=lambda r: _compile_group(r[0]))  # stable: the table's order within each group
    return _bars(plt, rows, "Compiling one kernel: cold, from the disk cache in a fresh process (jitbridge, CuPy, "
                 "cuda.core), and again in the same process; lower is better\nlabels: the time, and where given the "
                 "time ratio to the named baseline" + _subtitle(table),
                 "time, µs (log scale)\n'default arch': no arch given, so the GPU's architecture is asked of the "
                 "driver, which starts the driver (cuInit) in that fresh process: that is in the row's time\n"
                 "'the time of jitbridge (Python)': of jitbridge's disk hit in a fresh Python process, arch given "
                 "(the same work as CuPy's and cuda.core's rows: a fresh process, a warm disk cache)",
                 os.path.join(out, "compile.png"), log=True)


# The lines of compile_heavy.png: colour and style per series (the baseline grey, jitbridge blue, peers orange).
_HEAVY_STYLE = {"NVRTC direct": (FLOOR, "-", "s"), "jitbridge, PCH off": ("#9ecae1", "--", "o"),
                "jitbridge, automatic PCH": (JITBRIDGE, "-", "o"), "CuPy RawKernel": (PEER, "-", "^"),
                "cuda.core Program": ("#a6611a", ":", "v")}


def plot_compile_heavy(plt, table, out):
    """compile_heavy.png from the 'compile_heavy' table: per header family, each series' time for kernels 1..5."""
    from matplotlib.ticker import FuncFormatter

    series = [h for h in table["headers"][1:] if h != "goal"]
    families, current = {}, None
    for r in table["rows"]:
        label = r[0]
        if not label.startswith(" "):
            current = label.rsplit(", kernel", 1)[0]
            families[current] = []
        if current is None or time_us(r[1]) is None:
            continue  # the "(compiles that used a PCH, of 5)" rows
        families[current].append([time_us(r[1 + i]) for i in range(len(series))])
    families = {k: v for k, v in families.items() if v}
    if not families:
        raise ValueError("table 'compile_heavy': no kernel rows")
    fig, axes = plt.subplots(1, len(families), figsize=(max(8, 6 * len(families)), 4.5), squeeze=False)
    handles = {}
    for ax, (family, kernels) in zip(axes[0], families.items()):
        xs = list(range(1, len(kernels) + 1))
        for i, name in enumerate(series):
            pts = [(x, k[i] / 1e3) for x, k in zip(xs, kernels) if k[i] is not None]
            if pts:
                colour, style, marker = _HEAVY_STYLE.get(name, (None, "-", "o"))
                (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, linestyle=style,
                                  color=colour, label=name)
                handles.setdefault(name, line)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "235" else ""))
        ax.set_xticks(xs)
        ax.set_xlabel("kernel compiled in the process (1 = first)")
        ax.set_ylabel("compile time, ms (log scale)")
        ax.set_title(family, fontsize=10)
    fig.suptitle("Heavy headers: five different kernels compiled one after another in a fresh process, lower is "
                 "better\nbaseline: NVRTC called directly (grey)" + _subtitle(table), fontsize=10)
    fig.tight_layout()
    fig.legend(handles=list(handles.values()), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(handles),
               fontsize=9, frameon=False)  # below the plots: it covers no line
    path = os.path.join(out, "compile_heavy.png")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


FIGURES = (("launch_host", plot_launch), ("compile_path", plot_compile), ("compile_heavy", plot_compile_heavy))


def plot_all(path, out):
    """Writes every figure whose table the file has into `out`; returns (written paths, skipped notes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = load(path)
    os.makedirs(out, exist_ok=True)
    written, skipped = [], []
    for key, fn in FIGURES:
        if key in tables:
            written.append(fn(plt, tables[key], out))
        else:
            skipped.append(f"{key} (not in {path})")
    return written, skipped


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="bench/plot.py", description=__doc__.split("\n\n")[0])
    p.add_argument("json", nargs="?", help="the bench JSON file (default: $JITBRIDGE_BENCH_JSON)")
    p.add_argument("--out", help="folder for the PNG files (default: the JSON file's folder)")
    args = p.parse_args(argv)
    implicit = not argv  # run by scripts/gpu-check with the other bench scripts
    path = args.json or os.environ.get("JITBRIDGE_BENCH_JSON")
    if not path or (implicit and not os.path.exists(path)):
        print("plot: no bench JSON to plot (give a file, or set JITBRIDGE_BENCH_JSON while running the benches)")
        return 0 if implicit else 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot: matplotlib is not installed (pip install matplotlib); no figures made")
        return 0 if implicit else 1
    out = args.out or os.path.dirname(os.path.abspath(path))
    try:
        written, skipped = plot_all(path, out)
    except (OSError, ValueError) as e:
        print(f"plot: {e}", file=sys.stderr)
        return 1
    for w in written:
        print(f"plot: wrote {w}")
    for s in skipped:
        print(f"plot: skipped {s}")
    if not written:
        print(f"plot: {path} has none of the tables plotted ({', '.join(k for k, _ in FIGURES)})", file=sys.stderr)
        return 0 if implicit else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
