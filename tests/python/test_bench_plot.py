"""bench/_table.py's JSON record of the tables (JITBRIDGE_BENCH_JSON) and bench/plot.py's figures, on a small stand-in
file shaped like what bench_launch.py and bench_compile.py record (no GPU needed)."""

import json
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import _table  # noqa: E402
import plot  # noqa: E402

LAUNCH_ROWS = [
    ["raw cuLaunchKernel (C++ loop, this process)", "2.10", "2.10", "1.00x", ""],
    ["jitbridge, 4 torch tensors + int", "3.35", "2.31", "1.10x", "<= 1.15x ok"],
    ["CuPy RawKernel, CuPy arrays", "5.80", "4.76", "2.27x", ""],
    ["Triton, torch tensors", "n/a (ImportError: No module named 'triton')", "", "", ""],
]
COMPILE_ROWS = [
    ["cold compile, NVRTC called directly (C++)", "25.10 ms", "", ""],
    ["cold compile, jitbridge (C++, signatures+resources)", "25.90 ms", "1.032x direct", "<= 1.1x ok"],
    ["disk hit, fresh process, Python (arch given)", "412.00 us", "", "< 1 ms ok"],
    ["CuPy RawModule, fresh process, its disk cache warm", "n/a (no cupy)", "", ""],
    ["same compile again in one process, Python", "1.20 us", "", "< 5 us ok"],
]
HEAVY_HEADERS = ["kernel", "NVRTC direct", "jitbridge, PCH off", "jitbridge, automatic PCH", "CuPy RawKernel",
                 "cuda.core Program", "goal"]
HEAVY_ROWS = [
    ["cub BlockReduce (cub/block/block_reduce.cuh), kernel 1", "1.20 s", "1.21 s (1.01x)", "1.25 s (1.04x)",
     "1.30 s (1.08x)", "n/a (no cuda.core)", "<= 1.1x ok"],
    ["  kernel 2", "1.18 s", "1.19 s (1.01x)", "300.00 ms (0.25x)", "1.25 s (1.06x)", "", "<= 0.3x ok"],
    ["  (compiles that used a PCH, of 5)", "", "0", "4", "", "", ""],
]


@pytest.fixture
def bench_json(tmp_path, monkeypatch):
    path = tmp_path / "bench.json"
    monkeypatch.setenv("JITBRIDGE_BENCH_JSON", str(path))
    return path


def test_print_table_records_rows_as_printed(bench_json, capsys):
    _table.print_table("Host time per launch, 60 rounds", ["launch", "us", "net us", "net vs raw", "goal"],
                       LAUNCH_ROWS, key="launch_host")
    assert "jitbridge, 4 torch tensors + int" in capsys.readouterr().out  # still printed
    data = json.loads(bench_json.read_text())
    assert data["format"] == _table.JSON_FORMAT
    (t,) = data["tables"]
    assert t["key"] == "launch_host" and t["title"] == "Host time per launch, 60 rounds"
    assert t["headers"] == ["launch", "us", "net us", "net vs raw", "goal"] and t["rows"] == LAUNCH_ROWS
    assert t["time"] and t["script"]


def test_tables_accumulate_and_a_key_replaces(bench_json):
    _table.print_table("A 1", ["x"], [["1"]], key="a")
    _table.print_table("Linking (sm_90; medians of 15)", ["x"], [[2.5]])  # no key: one made from the title
    _table.print_table("A 2", ["x"], [["3"]], key="a")
    tables = json.loads(bench_json.read_text())["tables"]
    assert [t["key"] for t in tables] == ["linking_sm_medians_of", "a"]
    assert tables[0]["rows"] == [["2.5"]] and tables[1]["title"] == "A 2"


def test_nothing_recorded_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("JITBRIDGE_BENCH_JSON", raising=False)
    monkeypatch.chdir(tmp_path)
    assert _table.record_table("t", ["x"], [["1"]]) is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content, words", [("{not json", "not a JSON file"),
                                            ('{"tables": []}', "not a jitbridge bench")])
def test_a_file_that_is_not_a_bench_file_is_refused(bench_json, content, words, capsys):
    bench_json.write_text(content)
    with pytest.raises(ValueError, match=f"JITBRIDGE_BENCH_JSON={bench_json}: {words}"):
        _table.print_table("t", ["x"], [["value 1"]])
    assert bench_json.read_text() == content  # left as it was
    assert "value 1" in capsys.readouterr().out  # the table was printed before


@pytest.mark.parametrize("cell, us", [("12.5 us", 12.5), ("1.50 ms", 1500.0), ("2 s", 2e6), ("500.0 ns", 0.5),
                                      ("1.21 s (1.01x)", 1.21e6), ("n/a (no cupy)", None), ("", None), ("3.1", None)])
def test_time_cells(cell, us):
    if us is None:
        assert plot.time_us(cell) is None
    else:
        assert plot.time_us(cell) == pytest.approx(us)


def test_number_cells():
    assert plot.number("2.31") == 2.31 and plot.number("1.10x") == 1.10 and plot.number("n/a") is None


def write_stand_in(path):
    _table.record_table("launch", ["launch", "us", "net us", "net vs raw", "goal"], LAUNCH_ROWS, "launch_host", path)
    _table.record_table("compile", ["measurement", "time", "ratio", "goal"], COMPILE_ROWS, "compile_path", path)
    _table.record_table("heavy", HEAVY_HEADERS, HEAVY_ROWS, "compile_heavy", path)


def test_the_plotted_values_are_the_tables(tmp_path, monkeypatch):
    path = str(tmp_path / "b.json")
    write_stand_in(path)
    tables = plot.load(path)
    drawn = {}
    monkeypatch.setattr(plot, "_bars", lambda plt, rows, title, xlabel, out, log=False: drawn.setdefault(out, rows))
    plot.plot_launch(None, tables["launch_host"], "o")
    plot.plot_compile(None, tables["compile_path"], "o")
    launch, compile_ = drawn[os.path.join("o", "launch.png")], drawn[os.path.join("o", "compile.png")]
    assert [(r[0], r[1]) for r in launch] == [(r[0], float(r[2])) for r in LAUNCH_ROWS[:3]]  # net us
    # Each label: the time, and the ratio as a time ratio (not a speedup).
    assert [r[2] for r in launch] == ["2.10 µs (1.00x the time of the baseline)",
                                      "2.31 µs (1.10x the time of the baseline)",
                                      "4.76 µs (2.27x the time of the baseline)"]
    assert [r[3] for r in launch] == [plot.FLOOR, plot.JITBRIDGE, plot.PEER]
    assert [r[1] for r in compile_] == [25100.0, 25900.0, 412.0, 1.2]  # the n/a row left out
    assert [r[3] for r in compile_] == [plot.FLOOR, plot.JITBRIDGE, plot.JITBRIDGE, plot.JITBRIDGE]
    assert compile_[1][2] == "25.90 ms  1.032x the time of NVRTC called directly"


def test_ratio_cells_read_as_time_ratios():
    assert plot.ratio_text("96.7x jitbridge (Python)") == "96.7x the time of jitbridge (Python)"
    assert plot.ratio_text("1.20x", "the baseline") == "1.20x the time of the baseline"
    assert plot.ratio_text("") == "" and plot.ratio_text("n/a") == "n/a"


def test_the_compile_figure_puts_the_fresh_process_rows_together(monkeypatch):
    rows = [["cold compile, NVRTC called directly (C++)", "25.10 ms", "", ""],
            ["disk hit, fresh process, Python (arch given)", "412.00 us", "", ""],
            ["same compile again in one process, Python", "1.20 us", "", ""],
            ["CuPy RawModule, fresh process, its disk cache warm", "20.00 ms", "48.5x jitbridge (Python)", ""]]
    drawn = {}
    monkeypatch.setattr(plot, "_bars", lambda plt, rows, title, xlabel, out, log=False: drawn.setdefault(out, rows))
    plot.plot_compile(None, {"key": "compile_path", "headers": ["measurement", "time", "ratio", "goal"],
                             "rows": rows}, "o")
    assert [r[0] for r in drawn[os.path.join("o", "compile.png")]] == [rows[0][0], rows[1][0], rows[3][0], rows[2][0]]


def test_plot_writes_the_pngs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "b.json"
    write_stand_in(str(path))
    out = tmp_path / "figures"
    assert plot.main([str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for name in ("launch.png", "compile.png", "compile_heavy.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name
        assert f"plot: wrote {out / name}" in printed
    assert sorted(p.name for p in out.iterdir()) == ["compile.png", "compile_heavy.png", "launch.png"]


def test_plot_with_only_some_tables_and_errors(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "b.json"
    _table.record_table("launch", ["launch", "us", "net us", "net vs raw", "goal"], LAUNCH_ROWS, "launch_host",
                        str(path))
    assert plot.main([str(path)]) == 0  # into the JSON's folder
    out = capsys.readouterr().out
    assert "wrote" in out and "skipped compile_path" in out and (tmp_path / "launch.png").exists()
    other = tmp_path / "other.json"
    _table.record_table("x", ["a"], [["1"]], "link", str(other))
    assert plot.main([str(other)]) == 1
    assert "has none of the tables plotted" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert plot.main([str(bad)]) == 1
    assert f"{bad}: not a jitbridge bench file" in capsys.readouterr().err
    # Run with no arguments (scripts/gpu-check) and nothing recorded: nothing to do, not a failure.
    monkeypatch.delenv("JITBRIDGE_BENCH_JSON", raising=False)
    assert plot.main([]) == 0
    assert plot.main([str(tmp_path / "missing.json")]) == 1


def test_the_legend_names_the_peers_and_floors_the_chart_shows():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r[0] for r in COMPILE_ROWS] + ["cuda.core Program.compile + get_kernel, fresh process"]
    fig = plt.figure()
    plot._kinds_legend(fig, {plot._kind(label) for label in labels}, labels)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "jitbridge", "other libraries (CuPy, cuda.core)", "floor: NVRTC called directly"]
    plt.close(fig)


def test_value_labels_end_inside_the_axes():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for log in (False, True):
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.barh([0, 1], [1.0, 100.0])
        if log:
            ax.set_xscale("log")
        labels = [ax.text(v, y, " a long value label, 27.57x the time of the baseline", va="center")
                  for y, v in ((0, 1.0), (1, 100.0))]
        fig.canvas.draw()
        assert max(t.get_window_extent().x1 for t in labels) > ax.get_window_extent().x1  # crossing the frame
        plot._fit_labels(fig, ax, labels)
        fig.canvas.draw()
        assert max(t.get_window_extent().x1 for t in labels) <= ax.get_window_extent().x1, log
        plt.close(fig)
