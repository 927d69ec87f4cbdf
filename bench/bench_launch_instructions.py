"""bench_launch_instructions.py — host instructions per launch (valgrind's callgrind) of jitbridge's launch paths on
the fake driver (tests/fuzz/fake_cuda), no GPU needed: from C++ (bench/launch_bench.cpp --count: raw cuLaunchKernel,
the typed launch(), the C interface with 1-d arrays and with bare pointers) and from Python (bench/bench_launch_cpu.py
--count: CuPy-like, Numba-like and C exchange-API arrays). Instruction counts do not drift with the machine's load,
so two builds (same compiler and flags) compare exactly; what they cost on a GPU stays bench_c_api.py's and
bench_launch.py's. Each C++ row counts only counted_launches() (callgrind --toggle-collect); each Python row counts
the kernel call's entry (vectorcall) over two runs of N and 2N launches, the difference divided by N, so that start-up
and the first launches (the full path, learning the shortcut) cancel. The children run with PYTHONHASHSEED=0, so
that the two runs differ only in N: with random seeds the Numba-like row of one source measured from 4,302 to 4,644
(the C++ rows never move). "vs raw": the row minus raw cuLaunchKernel's (the fake driver's launch itself, ~1,050
instructions, is in every row). Needs valgrind and the build tree
(bash scripts/setup; targets jitbridge_launch_bench, jitbridge_test_fake_cuda, _core, jitbridge_testing):

    python3 bench/bench_launch_instructions.py [build] [N]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import print_table  # noqa: E402
from bench_launch_cpu import fake_driver_env  # noqa: E402

CPP_ROWS = [("raw cuLaunchKernel", "raw"), ("typed C++ launch()", "cpp"), ("C interface launch (1-d arrays)", "c_api"),
            ("C interface launch (bare pointers)", "c_api_bare")]
PY_ROWS = [("Python k(grid, block, (4 CuPy-like arrays, int))", "CuPy-like"),
           ("Python k(grid, block, (4 Numba-like arrays, int))", "Numba-like"),
           ("Python k(grid, block, (4 C exchange-API arrays, int))", "(4 C exchange-API arrays, int))")]
PY_ENTRY = "*vectorcall_into<&jitbridge::python::(anonymous namespace)::launch_kernel>*"


def collected(cmd, toggle, env, work):
    """Instructions callgrind collected inside `toggle` while running `cmd`."""
    out = work / "callgrind.out"
    run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", f"--toggle-collect={toggle}",
                          *cmd], env=env, capture_output=True, text=True, timeout=1800)
    m = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or not m:
        sys.exit(f"bench_launch_instructions: {' '.join(cmd)} failed:\n{run.stderr[-2000:]}")
    return int(m.group(1))


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "build").resolve()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    if not shutil.which("valgrind"):
        sys.exit("bench_launch_instructions: valgrind is not installed")
    exe = build / "bench" / "jitbridge_launch_bench"
    if not exe.is_file():
        sys.exit(f"bench_launch_instructions: no {exe} (build the jitbridge_launch_bench target)")
    with tempfile.TemporaryDirectory(prefix="jitbridge-bench-instr-") as tmp:
        work = Path(tmp)
        # One disk cache for every child, filled before valgrind runs (NVRTC under valgrind takes minutes).
        env = dict(fake_driver_env(build), JITBRIDGE_CACHE="1", JITBRIDGE_CACHE_DIR=str(work / "cache"),
                   PYTHONHASHSEED="0")
        script = str(Path(__file__).with_name("bench_launch_cpu.py"))
        subprocess.run([str(exe), "--count", "raw", "1"], env=env, check=True)
        for _, case in PY_ROWS:
            subprocess.run([sys.executable, script, str(build), "--count", case, "1"], env=env, check=True)
        per = {}
        for name, row in CPP_ROWS:
            per[name] = collected([str(exe), "--count", row, str(n)], "counted_launches*", env, work) / n
        for name, case in PY_ROWS:
            one, two = (collected([sys.executable, script, str(build), "--count", case, str(k)], PY_ENTRY, env, work)
                        for k in (n, 2 * n))
            per[name] = (two - one) / n
    raw = per[CPP_ROWS[0][0]]
    rows = [[name, f"{ir:,.0f}", "" if name == CPP_ROWS[0][0] else f"{ir - raw:+,.0f}"] for name, ir in per.items()]
    print_table(f"Instructions per launch on the fake driver (callgrind; C++ rows: {n} launches in counted_launches(); "
                f"Python rows: the kernel's vectorcall, ({2 * n} - {n} launches) / {n})",
                ["launch", "instructions", "vs raw"], rows, key="launch_instructions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
