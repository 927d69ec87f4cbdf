"""run_notebook.py — runs a notebook's code cells in order in one namespace, without Jupyter or IPython, and can
record their outputs into the notebook as Jupyter would.

    PYTHONPATH=build/python python3 examples/notebook/run_notebook.py examples/notebook/prototype_kernel.ipynb
    PYTHONPATH=build/python python3 examples/notebook/run_notebook.py NOTEBOOK --write-outputs OUT.ipynb
    python3 examples/notebook/run_notebook.py --check NOTEBOOK...

Understands the two magics jitbridge notebooks use: ``%load_ext jitbridge`` and ``%%cuda_kernel`` (through
jitbridge.ipython.cuda_kernel_magic, the code the real magic runs). Any other magic or shell escape is refused with
the cell and line it is on. A cell tagged ``raises-exception`` (cell metadata {"tags": ["raises-exception"]}) must
raise; its error is printed and the run goes on, as Jupyter does. A cell whose last statement is an expression
prints its value (not when the cell ends with ``;``). Exits non-zero, naming the cell, when a cell fails.

``--write-outputs OUT`` writes the notebook with each code cell's outputs in nbformat 4 form: its stdout/stderr
(``stream``), its last expression (``execute_result``: text/plain, and text/html from ``_repr_html_``), its
matplotlib figures (``display_data`` image/png, drawn with the Agg backend at FIGURE_DPI when the cell calls
``plt.show()`` or ends with figures open), and, for the tagged cell, the error (``error``, the traceback as text,
a CompileError's caret included; after jitbridge's HTML rendering of it as ``display_data`` when the notebook ran
``%load_ext jitbridge``, as Jupyter shows it). Cells are numbered 1, 2, ... (``execution_count``), and each code
cell's metadata records the SHA-256 of its source (metadata.jitbridge.source_sha256; the notebook's metadata the
digest of all code cells in order), so that ``--check`` (and CI) can tell that the committed outputs came from the
committed code. OUT may be NOTEBOOK itself. Nothing is written when a cell fails.

``--check`` runs nothing: it exits 1, saying what to re-run, when a notebook's code changed after its outputs were
recorded (a cell edited, added, removed or reordered; markdown edits do not count).
"""
import ast
import base64
import contextlib
import copy
import hashlib
import io
import json
import linecache
import os
import sys
import traceback

EXPECTED_ERROR_TAG = "raises-exception"
FIGURE_DPI = 80      # small PNGs in the committed notebooks
REGENERATE = ("PYTHONPATH=build/python python3 examples/notebook/run_notebook.py {path} --write-outputs {path} "
              "(on a machine with a GPU)")


class NotebookError(Exception):
    """A cell failed, did not raise though tagged to, or used something this runner does not support."""


def cell_source(cell):
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def code_cells(notebook):
    return [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]


def source_sha256(source):
    """The hex SHA-256 of a cell's source text (UTF-8)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def code_digest(notebook):
    """The hex SHA-256 of all code cells' sources in order (changes when a code cell is added, removed, moved)."""
    return hashlib.sha256(json.dumps([cell_source(c) for c in code_cells(notebook)]).encode("utf-8")).hexdigest()


def translate(source, cell_number):
    """('cuda_kernel', line, body) for a %%cuda_kernel cell, else ('python', code) with ``%load_ext jitbridge``
    turned into ``import jitbridge``. Raises NotebookError for any other magic or shell escape."""
    lines = source.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        magic, _, rest = lines[first].strip()[2:].partition(" ")
        if magic != "cuda_kernel":
            raise NotebookError(f"cell {cell_number}: the cell magic %%{magic} is not supported here (only "
                                f"%%cuda_kernel and %load_ext jitbridge)")
        return "cuda_kernel", rest, "\n".join(lines[first + 1:]) + "\n"
    code = []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.split() == ["%load_ext", "jitbridge"]:
            line = line[:len(line) - len(line.lstrip())] + "import jitbridge"
        elif stripped.startswith(("%", "!")):
            raise NotebookError(f"cell {cell_number}, line {number}: {stripped.split()[0]!r} is not supported here "
                                f"(only %%cuda_kernel and %load_ext jitbridge)")
        code.append(line)
    return "python", "\n".join(code) + "\n"


def loads_extension(source):
    return any(line.strip().split() == ["%load_ext", "jitbridge"] for line in source.splitlines())


# ---- outputs --------------------------------------------------------------------------------------------------

class CellOutputs:
    """One code cell's outputs as nbformat 4 dicts, in the order they appeared."""

    def __init__(self):
        self.outputs = []

    def stream(self, name, text):
        if not text:
            return
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self.outputs.append({"output_type": "stream", "name": name, "text": text})

    def display(self, data):
        self.outputs.append({"output_type": "display_data", "data": data, "metadata": {}})

    def result(self, execution_count, data):
        self.outputs.append({"output_type": "execute_result", "execution_count": execution_count, "data": data,
                             "metadata": {}})

    def error(self, exc):
        self.outputs.append({"output_type": "error", "ename": type(exc).__name__, "evalue": str(exc),
                             "traceback": error_traceback(exc)})


class _Tee(io.TextIOBase):
    """A text stream that writes through to ``real`` and records what it got as a cell's stream output."""

    def __init__(self, real, cell, name):
        super().__init__()
        self.real, self.cell, self.name = real, cell, name

    def writable(self):
        return True

    def write(self, text):
        self.real.write(text)
        self.cell.stream(self.name, text)
        return len(text)

    def flush(self):
        self.real.flush()

    def fileno(self):  # for code that writes to the descriptor itself (not recorded, as in Jupyter)
        return self.real.fileno()

    @property
    def encoding(self):
        return getattr(self.real, "encoding", "utf-8")


def _short_path(filename):
    """A traceback's file name without this machine's directories: relative to the sys.path entry holding it."""
    if filename.startswith("<"):
        return filename
    path = os.path.abspath(filename)
    roots = sorted((os.path.abspath(p) for p in sys.path if p), key=len, reverse=True)
    for root in roots:
        if path.startswith(root + os.sep):
            return os.path.relpath(path, root)
    return os.path.basename(path)


def error_traceback(exc):
    """The traceback of ``exc`` as text lines (nbformat's error.traceback): the cell's and the libraries' frames
    (not this runner's), paths made relative, then the exception's message (a CompileError's caret included)."""
    here = os.path.abspath(__file__)
    lines = ["Traceback (most recent call last):"]
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == here:
            continue
        lines.append(f'  File "{_short_path(frame.filename)}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    for chunk in traceback.format_exception_only(type(exc), exc):
        lines.extend(chunk.rstrip("\n").split("\n"))
    return lines


def _mime_bundle(value):
    """{'text/plain': repr(value)}, plus 'text/html' when ``value._repr_html_()`` gives a string."""
    data = {"text/plain": repr(value)}
    render = getattr(value, "_repr_html_", None)
    if callable(render) and not isinstance(value, type):
        try:
            html = render()
        except Exception:  # as IPython does: a failing formatter leaves the plain text
            html = None
        if isinstance(html, str):
            data["text/html"] = html
    return data


class _Figures:
    """Matplotlib figures as image/png outputs: pyplot is imported with the Agg backend (when installed) and its
    show() records the open figures into the running cell (and closes them); figures still open at the end of a
    cell are recorded then. pyplot.show is put back by restore()."""

    def __init__(self):
        self.cell = None
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            self.plt = None
            return
        self.plt = plt
        self.original_show = plt.show

        def show(*args, **kwargs):
            """pyplot.show() under run_notebook.py: records the open figures into the running cell."""
            if self.cell is not None:
                self.collect(self.cell)

        plt.show = show

    def collect(self, cell):
        if self.plt is None:
            return
        for number in self.plt.get_fignums():
            figure = self.plt.figure(number)
            png = io.BytesIO()
            figure.savefig(png, format="png", dpi=FIGURE_DPI, bbox_inches="tight", metadata={"Software": None})
            cell.display({"image/png": base64.b64encode(png.getvalue()).decode("ascii"), "text/plain": repr(figure)})
            self.plt.close(figure)

    def restore(self):
        if self.plt is not None:
            self.plt.show = self.original_show


# ---- running ---------------------------------------------------------------------------------------------------

def run_python(code, namespace, filename, cell, execution_count):
    """Executes ``code``; when its last statement is an expression (and the cell does not end with ';'), prints its
    value (unless None) and records it as the cell's execute_result."""
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # tracebacks show cell lines
    tree = ast.parse(code, filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None and code.rstrip().endswith(";"):
        tree.body.append(last)
        last = None
    exec(compile(tree, filename, "exec"), namespace)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
        if value is not None:
            data = _mime_bundle(value)
            cell.result(execution_count, data)
            return data["text/plain"]
    return None


def run_cell(cell, cell_number, namespace, outputs=None):
    """Runs one code cell in ``namespace``; its outputs go to ``outputs`` (a CellOutputs) when given."""
    outputs = CellOutputs() if outputs is None else outputs
    translated = translate(cell_source(cell), cell_number)
    shown = None
    with contextlib.redirect_stdout(_Tee(sys.stdout, outputs, "stdout")), \
            contextlib.redirect_stderr(_Tee(sys.stderr, outputs, "stderr")):
        if translated[0] == "cuda_kernel":
            from jitbridge.ipython import cuda_kernel_magic

            cuda_kernel_magic(translated[1], translated[2], namespace)
        else:
            shown = run_python(translated[1], namespace, f"<cell {cell_number}>", outputs, cell_number)
    if shown is not None:
        print(shown)  # to the console, not recorded as a stream: it is the cell's execute_result


def run_notebook(path, namespace=None, *, record=False):
    """Runs every code cell of the notebook at ``path`` in order; returns the namespace, or with ``record=True``
    (namespace, notebook with outputs). Raises NotebookError (nothing is recorded then)."""
    with open(path, encoding="utf-8") as f:
        notebook = json.load(f)
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    notebook = copy.deepcopy(notebook)
    figures = _Figures()
    extension_loaded = False
    try:
        for number, cell in enumerate(code_cells(notebook), 1):
            expects_error = EXPECTED_ERROR_TAG in cell.get("metadata", {}).get("tags", [])
            print(f"--- cell {number}{' (expected to raise)' if expects_error else ''}")
            outputs = CellOutputs()
            figures.cell = outputs
            try:
                run_cell(cell, number, namespace, outputs)
            except NotebookError:
                raise
            except Exception as e:
                if not expects_error:
                    raise NotebookError(f"cell {number} raised {type(e).__name__}: {e}") from e
                print(f"{type(e).__name__}: {e}")
                _record_error(outputs, e, extension_loaded)
            else:
                if expects_error:
                    raise NotebookError(f"cell {number} is tagged {EXPECTED_ERROR_TAG} but ran without an error")
            finally:
                figures.cell = None
            figures.collect(outputs)
            extension_loaded = extension_loaded or loads_extension(cell_source(cell))
            _store(cell, number, outputs.outputs)
    finally:
        figures.restore()
    _add_missing_ids(notebook)
    notebook.setdefault("metadata", {})["jitbridge"] = {
        "code_sha256": code_digest(notebook), "recorded_by": "examples/notebook/run_notebook.py --write-outputs"}
    return (namespace, notebook) if record else namespace


def _add_missing_ids(notebook):
    """nbformat 4.5 requires a unique ``id`` per cell: cells without one get ``cell-NN`` (NN: the cell's index)."""
    if (notebook.get("nbformat", 4), notebook.get("nbformat_minor", 0)) < (4, 5):
        return
    cells = notebook.get("cells", [])
    used = {c["id"] for c in cells if c.get("id")}
    for index, cell in enumerate(cells):
        if not cell.get("id"):
            candidate, n = f"cell-{index:02d}", 0
            while candidate in used:
                n += 1
                candidate = f"cell-{index:02d}-{n}"
            cell["id"] = candidate
            used.add(candidate)


def _record_error(outputs, exc, extension_loaded):
    """The tagged cell's error as Jupyter shows it: jitbridge's HTML (when %load_ext jitbridge ran), then the
    traceback."""
    if extension_loaded:
        try:
            from jitbridge._richerrors import error_html
        except ImportError:
            error_html = None
        html = error_html(exc) if error_html is not None else None
        if html is not None:
            outputs.display({"text/html": html, "text/plain": str(exc)})
    outputs.error(exc)


def _lines(text):
    return text.splitlines(True)


def _store(cell, execution_count, outputs):
    """Puts outputs (text split into lines, as nbformat writes them) and the source hash into ``cell``."""
    for output in outputs:
        if output["output_type"] == "stream":
            output["text"] = _lines(output["text"])
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/"):
                output["data"][mime] = _lines(value)
    cell["outputs"] = outputs
    cell["execution_count"] = execution_count
    cell.setdefault("metadata", {})["jitbridge"] = {"source_sha256": source_sha256(cell_source(cell))}


def write_notebook(notebook, path):
    """Writes ``notebook`` as nbformat does (1-space indent, sorted keys, a final newline)."""
    text = json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ---- the sync check --------------------------------------------------------------------------------------------

def sync_problems(notebook):
    """Why ``notebook``'s recorded outputs may not be what its code produces: a list of sentences, empty when every
    code cell's source matches the hash recorded with its outputs, the cells are numbered 1, 2, ... as one run
    numbers them, only cells tagged raises-exception hold an error, and no code cell was added, removed or moved."""
    problems = []
    for number, cell in enumerate(code_cells(notebook), 1):
        recorded = cell.get("metadata", {}).get("jitbridge", {}).get("source_sha256")
        tagged = EXPECTED_ERROR_TAG in cell.get("metadata", {}).get("tags", [])
        has_error = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
        if recorded is None:
            problem = ("no outputs recorded by run_notebook.py --write-outputs (its metadata has no "
                       "jitbridge.source_sha256)")
        elif recorded != source_sha256(cell_source(cell)):
            problem = "its code was edited after its outputs were recorded"
        elif cell.get("execution_count") != number:
            problem = (f"execution_count is {cell.get('execution_count')}, not {number} as one run of the whole "
                       f"notebook numbers it")
        elif has_error != tagged:
            problem = ("it is tagged raises-exception but has no error output" if tagged
                       else "it has an error output but is not tagged raises-exception")
        else:
            continue
        problems.append(f"cell {number}: {problem}")
    recorded = notebook.get("metadata", {}).get("jitbridge", {}).get("code_sha256")
    if not problems and recorded != code_digest(notebook):
        problems.append("code cells were added, removed or reordered after the outputs were recorded (the notebook's "
                        "metadata.jitbridge.code_sha256 differs)")
    return problems


def check(paths):
    """Prints each notebook's sync problems with the command that re-records it; returns the exit status."""
    status = 0
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                problems = sync_problems(json.load(f))
        except (OSError, ValueError) as e:
            print(f"{path}: cannot read it as a notebook: {e}", file=sys.stderr)
            status = 1
            continue
        if problems:
            status = 1
            print(f"{path}: its outputs are not those of its current code:", file=sys.stderr)
            for problem in problems:
                print(f"  - {problem}", file=sys.stderr)
            print(f"  re-run it to record them: {REGENERATE.format(path=path)}", file=sys.stderr)
        else:
            print(f"{path}: outputs in sync with the code")
    return status


def _arguments(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="run_notebook.py", description="Runs a notebook's code cells without "
                                     "Jupyter; --write-outputs records their outputs, --check compares a notebook's "
                                     "code with the code its outputs were recorded from.")
    parser.add_argument("notebooks", nargs="+", metavar="NOTEBOOK")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write-outputs", metavar="OUT", help="write the notebook with its outputs to OUT (may be "
                       "NOTEBOOK itself)")
    group.add_argument("--check", action="store_true", help="run nothing; exit 1 when a notebook's code changed "
                       "after its outputs were recorded")
    args = parser.parse_args(argv)
    if not args.check and len(args.notebooks) != 1:
        parser.error("runs one notebook at a time (--check takes several)")
    return args


def main(argv):
    args = _arguments(argv)
    if args.check:
        return check(args.notebooks)
    os.environ.setdefault("MPLBACKEND", "Agg")   # plots are drawn, not shown
    path = args.notebooks[0]
    try:
        _, notebook = run_notebook(path, record=True)
    except NotebookError as e:
        if e.__cause__ is not None:
            traceback.print_exception(type(e.__cause__), e.__cause__, e.__cause__.__traceback__)
        print(f"run_notebook: {e}", file=sys.stderr)
        return 1
    if args.write_outputs is not None:
        write_notebook(notebook, args.write_outputs)
        print(f"run_notebook: wrote {args.write_outputs} with the outputs")
    print(f"run_notebook: {os.path.basename(path)}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
