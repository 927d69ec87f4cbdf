"""run_notebook.py — runs a notebook's code cells in order in one namespace, without Jupyter or IPython.

    python3 examples/notebook/run_notebook.py examples/notebook/prototype_kernel.ipynb

Understands the two magics jitbridge notebooks use: ``%load_ext jitbridge`` and ``%%cuda_kernel`` (through
jitbridge.ipython.cuda_kernel_magic, the code the real magic runs). Any other magic or shell escape is refused with
the cell and line it is on. A cell tagged ``raises-exception`` (cell metadata {"tags": ["raises-exception"]}) must
raise; its error is printed and the run goes on, as Jupyter does. A cell whose last statement is an expression
prints its value. Exits non-zero, naming the cell, when a cell fails.
"""
import ast
import json
import os
import sys
import traceback

EXPECTED_ERROR_TAG = "raises-exception"


class NotebookError(Exception):
    """A cell failed, did not raise though tagged to, or used something this runner does not support."""


def cell_source(cell):
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


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


def run_python(code, namespace, filename):
    """Executes ``code``; when its last statement is an expression, prints the value (unless None)."""
    tree = ast.parse(code, filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), namespace)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
        if value is not None:
            print(repr(value))


def run_cell(cell, cell_number, namespace):
    """Runs one code cell in ``namespace``."""
    translated = translate(cell_source(cell), cell_number)
    if translated[0] == "cuda_kernel":
        from jitbridge.ipython import cuda_kernel_magic

        cuda_kernel_magic(translated[1], translated[2], namespace)
    else:
        run_python(translated[1], namespace, f"<cell {cell_number}>")


def run_notebook(path, namespace=None):
    """Runs every code cell of the notebook at ``path`` in order; returns the namespace. Raises NotebookError."""
    with open(path, encoding="utf-8") as f:
        notebook = json.load(f)
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    code_cells = [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]
    for number, cell in enumerate(code_cells, 1):
        expects_error = EXPECTED_ERROR_TAG in cell.get("metadata", {}).get("tags", [])
        print(f"--- cell {number}{' (expected to raise)' if expects_error else ''}")
        try:
            run_cell(cell, number, namespace)
        except NotebookError:
            raise
        except Exception as e:
            if not expects_error:
                raise NotebookError(f"cell {number} raised {type(e).__name__}: {e}") from e
            print(f"{type(e).__name__}: {e}")
            continue
        if expects_error:
            raise NotebookError(f"cell {number} is tagged {EXPECTED_ERROR_TAG} but ran without an error")
    return namespace


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    os.environ.setdefault("MPLBACKEND", "Agg")   # plots are drawn, not shown
    path = argv[0]
    try:
        run_notebook(path)
    except NotebookError as e:
        if e.__cause__ is not None:
            traceback.print_exception(type(e.__cause__), e.__cause__, e.__cause__.__traceback__)
        print(f"run_notebook: {e}", file=sys.stderr)
        return 1
    print(f"run_notebook: {os.path.basename(path)}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
