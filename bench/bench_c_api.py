"""bench_c_api.py — host time of one launch through jitbridge's C interface (jitbridge/c_api.h: kernel resolved once,
4 arrays + int described as a native add-on describes them, checked against the signature) against raw
cuLaunchKernel, from C++ with no Python in the loop (bench/launch_bench.cpp, timed round-robin). Every row but the
last launches one Function; the last is the C interface on kernel_from_source's own copy of the kernel. Goal
(issue 25): the C interface <= 1.05x raw cuLaunchKernel. Needs a GPU and the build tree's C++ benches (bash
scripts/setup).

    python3 bench/bench_c_api.py
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import cpp_bench, print_table  # noqa: E402

GOAL = 1.05


def main():
    exe = cpp_bench("jitbridge_launch_bench")
    if exe is None:
        sys.exit("bench_c_api: jitbridge_launch_bench is not built (bash scripts/setup builds it)")
    out = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"bench_c_api: {exe} failed: {out.stderr.strip()}")
    us = {k: float(v) for k, v in (line.split() for line in out.stdout.splitlines() if line.strip())}
    raw = us["raw_culaunchkernel_us"]
    rows = []
    for name, key, goal in (("raw cuLaunchKernel (array of pointers)", "raw_culaunchkernel", ""),
                            ("raw cuLaunchKernel (one buffer)", "raw_culaunchkernel_buffer_form", ""),
                            ("jitbridge typed C++ launch()", "jitbridge_cpp_launch", ""),
                            ("jitbridge C interface launch", "jitbridge_c_api_launch", f"<= {GOAL:.2f}x"),
                            ("jitbridge C interface launch, bare pointers (ndim 0)",
                             "jitbridge_c_api_launch_bare_pointers", ""),
                            ("jitbridge C interface launch, kernel_from_source's own module",
                             "jitbridge_c_api_launch_own_module", "")):
        ratio = us[key + "_us"] / raw
        paired = us.get("ratio_" + key)
        verdict = "" if not goal else ("met" if paired <= GOAL else "MISSED")
        rows.append([name, f"{us[key + '_us']:.3f}", f"{ratio:.3f}x", "" if paired is None else f"{paired:.3f}x",
                     f"{goal} {verdict}".strip()])
    print_table("Host time per launch from C++, k(4 float arrays, int), grid 1 x block 32, legacy stream: medians over "
                "400 round-robin rounds of one batch of 200 launches per row; paired: the median over rounds of the "
                "row's ratio to that round's raw batch (the goal's measure)",
                ["launch", "us", "vs raw", "paired vs raw", "goal"], rows, key="launch_c_api")
    steps = [[key[len("step_"):-len("_us")], f"{value:.4f}"] for key, value in us.items() if key.startswith("step_")]
    if steps:  # where the typed launch's time goes: each step alone in a tight loop, no launch
        print_table("Steps of the typed C++ launch, each alone in a loop of 200,000 (no launch; pack_fast: its fast path, "
                    "pack: the full path, fill x5 + pack_all)", ["step", "us"], steps,
                    key="launch_c_api_steps")
    return 0 if us["ratio_jitbridge_c_api_launch"] <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
