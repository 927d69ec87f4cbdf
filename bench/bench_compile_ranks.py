"""bench_compile_ranks.py — N processes (ranks) starting together on a cold kernel cache, as ranks of a job do: NVRTC
compiles per key (goal: exactly 1) and the slowest rank's time to its program against one process's cold compile
(goal: at most 1.2x), for a small kernel and a cub one; beside it the same ranks with waiting off
(JITBRIDGE_CACHE_LOCK_TIMEOUT=0: each compiles, as before the cross-process lock). Compile only (no GPU needed).

    python3 bench/bench_compile_ranks.py [--ranks 8] [--repeat 3] [--arch sm_90]

Each trial uses a fresh cache directory and a kernel no cache has seen. Every rank imports jitbridge, says it is
ready, and waits for a gate file; the gate holds the wall-clock time it was opened, and each rank reports the time
from it to having its program (so a rank that notices the gate late counts that too). Times are medians over the
trials; "compiles" is the sum of the ranks' jitbridge.cache_info()["compiles"] in each trial (min-max over trials)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import child_env, print_table, use_jitbridge  # noqa: E402

RANK = r'''
import json, os, sys, time
import jitbridge
gate, ready, source_path, arch = sys.argv[1:5]
source = open(source_path).read()
open(ready, "w").close()
while not os.path.exists(gate):
    time.sleep(0.0005)
with open(gate) as f:  # written, then renamed into place: never seen half-written
    opened = float(f.read())
called = time.perf_counter()
program = jitbridge.compile(source, arch=arch)
call = time.perf_counter() - called
elapsed = time.time() - opened
info = jitbridge.cache_info()
print(json.dumps({"seconds": elapsed, "call": call, "compiles": info["compiles"], "waits": info["lock_waits"],
                  "origin": program.origin}))
'''

KERNELS = {
    "small (elementwise)": lambda tag: (
        f'extern "C" __global__ void axpy_{tag}(const float* x, float* y, float a, int n) {{\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = a * x[i] + y[i];\n}\n"),
    "cub BlockReduce": lambda tag: (
        "#include <cub/block/block_reduce.cuh>\n"
        'extern "C" __global__ void block_sum(const float* x, float* out) {\n'
        "  using R = cub::BlockReduce<float, 128>;\n"
        "  __shared__ typename R::TempStorage t;\n"
        "  float v = R(t).Sum(x[blockIdx.x * 128 + threadIdx.x]);\n"
        "  if (threadIdx.x == 0) out[blockIdx.x] = v;\n"
        f"}}\n// {tag}\n"),
}


def trial(make_source, ranks, arch, **env):
    """One trial: `ranks` processes on a fresh cache and a new kernel. Returns their reports."""
    with tempfile.TemporaryDirectory(prefix="jitbridge-ranks-") as tmp:
        source = os.path.join(tmp, "kernel.cu")
        with open(source, "w") as f:
            f.write(make_source(uuid.uuid4().hex))
        gate = os.path.join(tmp, "go")
        child = child_env(JITBRIDGE_CACHE_DIR=os.path.join(tmp, "cache"), **env)
        child.pop("JITBRIDGE_CACHE", None)
        procs = [subprocess.Popen([sys.executable, "-c", RANK, gate, os.path.join(tmp, f"ready-{i}"), source, arch],
                                  env=child, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(ranks)]
        deadline = time.monotonic() + 300
        while not all(os.path.exists(os.path.join(tmp, f"ready-{i}")) for i in range(ranks)):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                for p in procs:
                    p.kill()
                raise RuntimeError("a rank did not get ready: " + " | ".join(p.communicate()[1][-500:] for p in procs))
            time.sleep(0.005)
        with open(gate + ".tmp", "w") as f:
            f.write(repr(time.time()))
        os.rename(gate + ".tmp", gate)
        reports = []
        for p in procs:
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"a rank failed: {err.strip()[-2000:]}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
        return reports


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=8, help="processes starting together (default 8)")
    parser.add_argument("--repeat", type=int, default=3, help="trials per row, each on a new kernel (default 3)")
    parser.add_argument("--arch", default="sm_90", help="target to compile for (default sm_90; no GPU needed)")
    args = parser.parse_args()
    if args.ranks < 1 or args.repeat < 1:
        parser.error("--ranks and --repeat must be at least 1")
    print(use_jitbridge())
    print(f"{os.cpu_count()} CPU cores; {args.ranks} ranks; {args.repeat} trials per row; arch {args.arch}")

    rows = []
    for name, make_source in KERNELS.items():
        single = [trial(make_source, 1, args.arch)[0]["seconds"] for _ in range(args.repeat)]
        base = statistics.median(single)
        rows.append([name, 1, "-", "1", f"{base * 1e3:.0f}", f"{base * 1e3:.0f}", "1.00x", "", "", ""])
        for label, env in (("on (default)", {}), ("off (timeout 0)", {"JITBRIDGE_CACHE_LOCK_TIMEOUT": 0})):
            slowest, slowest_call, compiler, compiles = [], [], [], []
            for _ in range(args.repeat):
                reports = trial(make_source, args.ranks, args.arch, **env)
                slowest.append(max(r["seconds"] for r in reports))
                slowest_call.append(max(r["call"] for r in reports))
                compiler.append(min(r["call"] for r in reports if r["origin"] == "compiled"))
                compiles.append(sum(r["compiles"] for r in reports))
            worst, worst_call = statistics.median(slowest), statistics.median(slowest_call)
            span = f"{min(compiles)}" if min(compiles) == max(compiles) else f"{min(compiles)}-{max(compiles)}"
            rows.append([name, args.ranks, label, span, f"{base * 1e3:.0f}", f"{worst * 1e3:.0f}",
                         f"{worst / base:.2f}x", f"{worst_call * 1e3:.0f}", f"{worst_call / base:.2f}x",
                         f"{statistics.median(compiler) * 1e3:.0f}"])
    print_table(f"{args.ranks} ranks starting together on a cold cache (medians of {args.repeat} trials; goal with "
                "waiting on: 1 compile per key, slowest <= 1.2x one process's cold compile)",
                ["kernel", "ranks", "waiting", "NVRTC compiles per key", "1 process cold (ms)",
                 "slowest rank from the gate (ms)", "/ 1 process", "slowest compile() call (ms)", "/ 1 process",
                 "fastest compiling rank's call (ms)"], rows)
    print("From the gate: until the rank has its program, counting how late it noticed the gate (with more ranks "
          "than cores, that is the scheduler's doing). compile() call: from the call to its return. The fastest "
          "compiling rank's call: how long NVRTC took among the 8 (with waiting on, the one compile), which shows "
          "what other work on the machine cost the compile itself.")


if __name__ == "__main__":
    main()
