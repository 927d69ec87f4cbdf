"""The notebook runner's recorded outputs (run_notebook.py --write-outputs) on stand-in notebooks, its sync check,
and the committed notebooks: every code cell has outputs, recorded from the code that is committed. No GPU needed
(the stand-ins compile with NVRTC for sm_90 and launch nothing)."""
import base64
import copy
import importlib.util
import json
import struct
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "examples" / "notebook"
COMMITTED = ["prototype_kernel.ipynb", "autograd_op.ipynb"]

BAD_KERNEL = 'extern "C" __global__ void bad(float* y, int n) {\n  if (n > 0) y[0] = beta;\n}\n'


@pytest.fixture
def runner():
    spec = importlib.util.spec_from_file_location("jitbridge_run_notebook_outputs", NOTEBOOK_DIR / "run_notebook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code(source, tags=None):
    return {"cell_type": "code", "execution_count": None, "metadata": {"tags": tags} if tags else {}, "outputs": [],
            "source": source.splitlines(True)}


def write(path, cells):
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4,
                                "nbformat_minor": 5}))
    return path


def text(value):
    return "".join(value) if isinstance(value, list) else value


STAND_IN = [
    code('%load_ext jitbridge\nimport sys\nprint("hello from cell 1")\nprint("a warning", file=sys.stderr)\n'
         'print("more")\n'),
    code('class Table:\n    def __repr__(self):\n        return "Table(2 rows)"\n\n'
         '    def _repr_html_(self):\n        return "<table><tr><td>1</td></tr></table>"\n\n\nTable()'),
    code("x = 41\nx + 1;"),
    {"cell_type": "markdown", "metadata": {}, "source": ["prose"]},
    code("%%cuda_kernel bad\n" + BAD_KERNEL, tags=["raises-exception"]),
    code("def f():\n    return x + 1\n\nf()"),
]


@pytest.fixture
def recorded(runner, tmp_path, monkeypatch, capsys):
    """The stand-in notebook as run_notebook.py --write-outputs writes it; its console output is checked here."""
    monkeypatch.setenv("JITBRIDGE_ARCH", "sm_90")
    source = write(tmp_path / "stand_in.ipynb", STAND_IN)
    out = tmp_path / "out.ipynb"
    assert runner.main([str(source), "--write-outputs", str(out)]) == 0
    console = capsys.readouterr()
    assert "hello from cell 1\nmore\n--- cell 2\nTable(2 rows)\n" in console.out    # as before: the value printed
    assert "--- cell 4 (expected to raise)\nCompileError: bad.cu:2:" in console.out
    assert f"run_notebook: wrote {out} with the outputs" in console.out and console.err == "a warning\n"
    return json.loads(out.read_text())


def test_write_outputs_records_streams_results_and_the_error(recorded, runner):
    cells = [c for c in recorded["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in cells] == [1, 2, 3, 4, 5]
    first = cells[0]["outputs"]
    assert [(o["output_type"], o["name"], text(o["text"])) for o in first] == [
        ("stream", "stdout", "hello from cell 1\n"), ("stream", "stderr", "a warning\n"), ("stream", "stdout", "more\n")]
    assert first[0]["text"] == ["hello from cell 1\n"]                      # nbformat's list of lines
    (result,) = cells[1]["outputs"]
    assert result["output_type"] == "execute_result" and result["execution_count"] == 2
    assert {k: text(v) for k, v in result["data"].items()} == {
        "text/plain": "Table(2 rows)", "text/html": "<table><tr><td>1</td></tr></table>"}
    assert cells[2]["outputs"] == []                                       # a trailing ';' shows nothing
    rich, error = cells[3]["outputs"]                                      # as Jupyter after %load_ext jitbridge
    assert rich["output_type"] == "display_data" and "<b>CompileError</b>" in text(rich["data"]["text/html"])
    assert text(rich["data"]["text/plain"]).startswith("bad.cu:2:")
    assert error["output_type"] == "error" and error["ename"] == "CompileError"
    assert error["evalue"].startswith('bad.cu:2:')
    lines = error["traceback"]
    assert lines[0] == "Traceback (most recent call last):"
    assert any(line.startswith('  File "jitbridge/') for line in lines)  # relative: no machine paths
    assert not any(str(ROOT) in line for line in lines)
    source_line = next(i for i, line in enumerate(lines) if line.endswith("y[0] = beta;"))
    caret = lines[source_line + 1]
    assert caret.rstrip().endswith("^") and caret.index("^") == lines[source_line].index("beta")
    (last,) = cells[4]["outputs"]
    assert text(last["data"]["text/plain"]) == "42"
    for number, cell in enumerate(cells, 1):
        assert cell["metadata"]["jitbridge"]["source_sha256"] == runner.source_sha256(text(cell["source"]))
    assert recorded["metadata"]["jitbridge"]["code_sha256"] == runner.code_digest(recorded)
    assert recorded["metadata"]["kernelspec"] == {"name": "python3"}          # the rest is kept
    assert recorded["cells"][3] == dict(STAND_IN[3], id="cell-03")              # nbformat 4.5 wants ids
    assert [c["id"] for c in recorded["cells"]] == [f"cell-{i:02d}" for i in range(6)]
    assert runner.sync_problems(recorded) == []


def test_figures_become_png_outputs_in_order(runner, tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    plt.close("all")
    cells = [code('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nprint("before show")\nplt.show()\n'
                  'print("after show")\nfig, ax = plt.subplots(figsize=(4, 2))\nax.plot([3, 2, 1]);'),
             code('print("no figure here")')]
    _, notebook = runner.run_notebook(write(tmp_path / "plots.ipynb", cells), record=True)
    outputs = notebook["cells"][0]["outputs"]
    assert [o["output_type"] for o in outputs] == ["stream", "display_data", "stream", "display_data"]
    assert text(outputs[0]["text"]) == "before show\n" and text(outputs[2]["text"]) == "after show\n"
    sizes = []
    for output in (outputs[1], outputs[3]):
        png = base64.b64decode(output["data"]["image/png"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        sizes.append(struct.unpack(">II", png[16:24]))                    # IHDR width, height
        assert text(output["data"]["text/plain"]).startswith("<Figure size")
    (w1, h1), (w2, h2) = sizes
    assert 300 < w1 <= 6.4 * runner.FIGURE_DPI + 10 and h1 <= 4.8 * runner.FIGURE_DPI + 10   # small, at FIGURE_DPI
    assert w2 <= 4 * runner.FIGURE_DPI + 10 and h2 < h1
    assert [o["output_type"] for o in notebook["cells"][1]["outputs"]] == ["stream"]   # figures were closed
    assert plt.get_fignums() == [] and plt.show.__module__ == "matplotlib.pyplot"      # pyplot.show put back


def test_nothing_is_written_when_a_cell_fails(runner, tmp_path, capsys):
    out = tmp_path / "out.ipynb"
    path = write(tmp_path / "fails.ipynb", [code('print("ran")'), code("1 / 0")])
    assert runner.main([str(path), "--write-outputs", str(out)]) == 1
    assert not out.exists()
    assert "cell 2 raised ZeroDivisionError" in capsys.readouterr().err


def test_sync_check_finds_code_edited_after_the_outputs(recorded, runner, tmp_path, capsys):
    edited = copy.deepcopy(recorded)
    edited["cells"][1]["source"] = ["Table()  # changed\n"]
    assert runner.sync_problems(edited) == ["cell 2: its code was edited after its outputs were recorded"]
    path = tmp_path / "edited.ipynb"
    runner.write_notebook(edited, path)
    assert runner.main(["--check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "its outputs are not those of its current code" in err and "cell 2: its code was edited" in err
    assert f"run_notebook.py {path} --write-outputs {path}" in err

    prose = copy.deepcopy(recorded)
    prose["cells"][3]["source"] = ["other prose"]                          # markdown: no re-run needed
    assert runner.sync_problems(prose) == []
    runner.write_notebook(prose, path)
    assert runner.main(["--check", str(path)]) == 0

    removed = copy.deepcopy(recorded)
    del removed["cells"][2]
    for number, cell in enumerate(c for c in removed["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = number + 1
    assert [p.split(" (")[0] for p in runner.sync_problems(removed)] == [
        "code cells were added, removed or reordered after the outputs were recorded"]

    renumbered = copy.deepcopy(recorded)
    renumbered["cells"][0]["execution_count"] = 7
    assert runner.sync_problems(renumbered) == [
        "cell 1: execution_count is 7, not 1 as one run of the whole notebook numbers it"]

    untagged = copy.deepcopy(recorded)
    untagged["cells"][4]["metadata"]["tags"] = []
    assert runner.sync_problems(untagged) == ["cell 4: it has an error output but is not tagged raises-exception"]

    clean = copy.deepcopy(recorded)
    for cell in clean["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            del cell["metadata"]["jitbridge"]
    problems = runner.sync_problems(clean)
    assert len(problems) == 5 and problems[0].startswith("cell 1: no outputs recorded by run_notebook.py")


def test_check_names_an_unreadable_notebook(runner, tmp_path, capsys):
    (tmp_path / "broken.ipynb").write_text("{")
    assert runner.main(["--check", str(tmp_path / "broken.ipynb"), str(tmp_path / "missing.ipynb")]) == 1
    err = capsys.readouterr().err
    assert "broken.ipynb: cannot read it as a notebook" in err and "missing.ipynb: cannot read" in err
    with pytest.raises(SystemExit):
        runner.main([str(tmp_path / "a.ipynb"), str(tmp_path / "b.ipynb")])   # one notebook at a time
    assert "one notebook at a time" in capsys.readouterr().err


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_notebook_shows_outputs_of_its_code(runner, name):
    notebook = json.loads((NOTEBOOK_DIR / name).read_text())
    problems = runner.sync_problems(notebook)
    assert problems == [], (
        f"examples/notebook/{name}: its outputs are not those of its code:\n  " + "\n  ".join(problems) +
        f"\nRecord them again: {runner.REGENERATE.format(path='examples/notebook/' + name)}")
    cells = runner.code_cells(notebook)
    assert all(cell["outputs"] for cell in cells), [n for n, c in enumerate(cells, 1) if not c["outputs"]]
    outputs = [o for cell in cells for o in cell["outputs"]]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no plot recorded (matplotlib missing?)"
    assert any("jitbridge-benchmark" in text(o.get("data", {}).get("text/html", "")) for o in outputs), \
        "no jitbridge.benchmark table recorded"
    assert text(cells[-1]["outputs"][-1]["text"]).endswith(f"{name.split('.')[0]}: ok\n")
    (error,) = [o for o in outputs if o["output_type"] == "error"]
    if name == "prototype_kernel.ipynb":
        assert error["ename"] == "CompileError"
        assert any(line.lstrip().startswith("|") and line.rstrip().endswith("^") for line in error["traceback"])
        assert "expf(-beta * x[i])" in "\n".join(error["traceback"])
    else:
        assert error["ename"] == "OpDeclarationError" and "args= has 4 entries" in error["evalue"]


def test_autograd_notebook_declares_its_op_without_a_gpu(runner, monkeypatch):
    """The autograd notebook's kernel and declaration cells, run here: NVRTC compiles the kernels, the broken
    declaration fails as its markdown says, and the fixed one passes the checks (registration is stubbed: it needs
    torch, and its GPU run is test_torch_ops_gpu.py::test_autograd_notebook_runs_end_to_end)."""
    import jitbridge.torch as jt

    monkeypatch.setenv("JITBRIDGE_ARCH", "sm_90")
    monkeypatch.setattr(jt, "_register_custom_op", lambda spec: spec)
    cells = runner.code_cells(json.loads((NOTEBOOK_DIR / "autograd_op.ipynb").read_text()))
    kernels, broken, fixed = (runner.cell_source(c) for c in cells[1:4])
    assert broken.startswith("custom_op(") and runner.EXPECTED_ERROR_TAG in cells[2]["metadata"]["tags"]
    namespace = {"__name__": "__main__"}
    exec("from jitbridge.torch import Launch, Output, custom_op, numel\nimport jitbridge", namespace)
    runner.run_cell(cells[1], 2, namespace)
    assert str(namespace["fwd"]["float64"].signature) == "(double const*, double*, double, long long)"
    with pytest.raises(jt.OpDeclarationError, match=r"swish_bwd<float>: the kernel takes 5 parameters .* args= has "
                                                    r"4 entries"):
        runner.run_cell(cells[2], 3, namespace)
    runner.run_cell(cells[3], 4, namespace)
    runner.run_cell(cells[3], 4, namespace)         # re-run: a new name each time
    spec = namespace["swish"]
    assert spec.name == "notebook::swish_2" and namespace["version"] == 2
    assert spec.forward.schema(1) == "(Tensor x, float beta) -> Tensor"
    assert spec.backward.schema(1) == "(Tensor x, Tensor grad_y, float beta) -> Tensor"
    assert kernels.count("__global__") == 2
