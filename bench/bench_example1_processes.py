"""bench_example1_processes.py — example 1's speed measurement (examples/torch/fused_bias_gelu.py,
measure_speedups: forward + backward at 64M float32 elements, eager PyTorch against the jitbridge op) repeated in
N fresh interpreters, one after another, with min/median/max of the jitbridge speedup over eager for both
timings: `step` (one step from an idle GPU, host time visible) and `loop` (back-to-back steps, a training loop).
Issue 15's goal: >= 1.6x in every run. Usage: bench_example1_processes.py [N] [--with-compile]
(N defaults to 5, or JITBRIDGE_BENCH_PROCESSES; --with-compile also times torch.compile in each process).
Needs a GPU and PyTorch; prints tables."""
import importlib.util
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import ROOT, child_env, print_table, use_jitbridge  # noqa: E402

CHILD = r'''
import json, sys
sys.path.insert(0, {examples!r})
import torch
import fused_bias_gelu as ex
results = ex.measure_speedups(ex.ROWS, ex.COLS, with_compile={with_compile!r})
print("RESULT " + json.dumps({{"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "goal": ex.SPEEDUP_GOAL, "elements": ex.ROWS * ex.COLS,
                              "results": [t._asdict() for t in results]}}))
'''
CHILD_TIMEOUT = 300


def run_process(with_compile):
    """One fresh interpreter's measure_speedups: a dict (device, torch, goal, results), or raises RuntimeError
    with the child's last line of error output."""
    code = CHILD.format(examples=os.path.join(ROOT, "examples", "torch"), with_compile=with_compile)
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True,
                         timeout=CHILD_TIMEOUT)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        err = out.stderr.strip().splitlines()
        raise RuntimeError(f"exit {out.returncode}: {err[-1] if err else 'no RESULT line'}")
    return json.loads(lines[-1][len("RESULT "):])


def speedups(run):
    """{"step": eager/jitbridge, "loop": ...} of one process's results, or None where the process failed or either
    variant could not run."""
    if "error" in run:
        return None
    eager, ours = run["results"][0], run["results"][-1]
    if eager["step_ms"] is None or ours["step_ms"] is None:
        return None
    return {kind: eager[f"{kind}_ms"] / ours[f"{kind}_ms"] for kind in ("step", "loop")}


def summarize(runs, goal):
    """Rows of the summary table: per timing kind, min/median/max of the speedup and the verdict."""
    rows = []
    for kind, what in (("step", "(a) step: one step from an idle GPU"),
                       ("loop", "(b) loop: back-to-back steps")):
        values = [s[kind] for s in (speedups(r) for r in runs) if s is not None]
        if not values:
            rows.append([what, "n/a", "", "", ""])
            continue
        below, failed = sum(v < goal for v in values), len(runs) - len(values)
        verdict = "ok" if below == failed == 0 else \
            f"MISSED ({below} of {len(values)} timed runs below{f', {failed} failed' if failed else ''})"
        rows.append([what, f"{min(values):.2f}x", f"{statistics.median(values):.2f}x", f"{max(values):.2f}x",
                     verdict])
    return rows


def per_process_rows(runs):
    rows = []
    for i, run in enumerate(runs, 1):
        if "error" in run:
            rows.append([str(i), f"failed: {run['error']}"[:110]] + [""] * 7)
            continue
        eager, ours = run["results"][0], run["results"][-1]
        s = speedups(run)
        if s is None:
            rows.append([str(i), f"n/a: {eager['note'] or ours['note']}"[:110]] + [""] * 7)
            continue
        rows.append([str(i), f"{eager['step_ms']:.3f}", f"{ours['step_ms']:.3f}", f"{s['step']:.2f}x",
                     f"{eager['loop_ms']:.3f}", f"{ours['loop_ms']:.3f}", f"{s['loop']:.2f}x",
                     f"{eager['host_ms']:.3f}", f"{ours['host_ms']:.3f}"])
        for t in run["results"][1:-1]:   # torch.compile, with --with-compile
            if t["step_ms"] is not None:
                rows.append([f"{i} {t['name']}", "", f"{t['step_ms']:.3f}", f"{eager['step_ms'] / t['step_ms']:.2f}x",
                             "", f"{t['loop_ms']:.3f}", f"{eager['loop_ms'] / t['loop_ms']:.2f}x", "",
                             f"{t['host_ms']:.3f}"])
    return rows


def main(argv):
    with_compile = "--with-compile" in argv
    counts = [a for a in argv if a != "--with-compile"]
    try:
        n = int(counts[0] if counts else os.environ.get("JITBRIDGE_BENCH_PROCESSES", "5"))
        if n < 1:
            raise ValueError
    except ValueError:
        given = counts[0] if counts else os.environ.get("JITBRIDGE_BENCH_PROCESSES")
        print(f"bench_example1_processes: N must be a positive integer, got {given!r}")
        return 2
    print(f"bench_example1_processes: measuring {use_jitbridge()}")
    import jitbridge
    if not jitbridge.driver_info()["devices"]:
        print("bench_example1_processes: no GPU here; nothing to measure")
        return 0
    if importlib.util.find_spec("torch") is None:   # the children import it
        print("bench_example1_processes: no GPU here; nothing to measure (PyTorch is not installed)")
        return 0
    runs = []
    for i in range(n):
        try:
            runs.append(run_process(with_compile))
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
            runs.append({"error": f"{type(e).__name__}: {e}"})
        print(f"  process {i + 1}/{n} done", flush=True)
    ok = [r for r in runs if "error" not in r]
    device = ok[0]["device"] if ok else "unknown device"
    goal = ok[0]["goal"] if ok else 1.6
    version = ok[0]["torch"] if ok else "?"
    eager = ok[0]["results"][0]["name"] if ok else "eager PyTorch"
    size = f"{ok[0]['elements'] / 2**20:.0f}M" if ok else "64M"
    print_table(f"Example 1 (fused bias + GELU, forward + backward, {size} float32) in {n} fresh processes on "
                f"{device}, torch {version}: ms per step, medians within each process; eager = {eager}",
                ["process", "eager step", "jitbridge step", "step speedup", "eager loop", "jitbridge loop",
                 "loop speedup", "eager host", "jitbridge host"], per_process_rows(runs))
    print_table(f"jitbridge speedup over eager across the {n} processes on {device} (goal: >= {goal}x in every run)",
                ["timing", "min", "median", "max", "verdict"], summarize(runs, goal))
    return 0 if ok and all(speedups(r) is not None for r in ok) and len(ok) == n else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
