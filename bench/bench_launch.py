"""bench_launch.py — host microseconds per launch of k(const float*, const float*, float*, float*, int), grid 1 x
block 32, side by side: jitbridge (torch tensors, CuPy arrays, Numba arrays) and its peers, each as a ratio to raw
cuLaunchKernel. The variants are measured round-robin (one batch of each in turn, many rounds) so that drift on a
shared machine hits them alike; the raw floor is measured the same way, in this process, from a C++ loop. A last
table compares launches alternating between torch tensors of GPU 0 and GPU 1 with launches all on GPU 0 (n/a with
one GPU). Needs a GPU; prints tables."""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import cpp_bench, print_table, testing_hooks, use_jitbridge  # noqa: E402

SRC = r'''
extern "C" __global__ void k(const float* a, const float* b, float* c, float* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { c[i] = a[i] + b[i]; d[i] = a[i] * b[i]; }
}
'''
BATCH, ROUNDS = 200, 60
RAW = "raw cuLaunchKernel (C++ loop, this process)"
FLOOR = "floor: Python -> C -> cuLaunchKernel (one buffer), prepacked, no checks"
TORCH_FLOOR = ("floor with torch's own calls: Python -> 4 x dltensor_from_py_object_no_sync + current_work_stream "
               "-> cuLaunchKernel (one buffer), no checks")
ALTERNATING_GOAL = 1.05   # alternating GPU 0 / GPU 1 against all on GPU 0 (issue 16)
# Issue 25's goals: (reference row, most allowed). Torch tensors against the floor with torch's own calls, CuPy and
# Numba arrays against raw cuLaunchKernel. Each is judged by the median over rounds of that round's ratio (both rows
# of a ratio come from the same round), so drift between rounds cancels out of it.
GOALS = {"jitbridge, 4 torch tensors + int": (TORCH_FLOOR, 1.07), "jitbridge, 4 CuPy arrays + int": (RAW, 1.35),
         "jitbridge, 4 Numba arrays + int": (RAW, 1.25)}
GOAL_NAMES = {TORCH_FLOOR: "torch floor", RAW: "raw"}


def net_us(samples, name, r):
    """Round r's microseconds per launch of row `name`, less that round's Python loop harness (raw rows are C++
    loops: nothing to take off)."""
    us = samples[name][r]
    return us if name.startswith("raw ") else us - samples["python loop harness (empty lambda)"][r]


def python_batch(launch):
    def run():
        t0 = time.perf_counter()
        for _ in range(BATCH):
            launch()
        return (time.perf_counter() - t0) * 1e6
    return run


def cpp_steps():
    """The C++ launch benchmark's rows, or None when it is not built (an installed package)."""
    exe = cpp_bench("jitbridge_launch_bench")
    if exe is None:
        return None
    out = subprocess.run([exe], capture_output=True, text=True, check=True, timeout=300).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines() if line.strip())}


def alternating_devices(k, torch, n):
    """Rows of the "alternating devices" table: us per launch of k with 4 torch tensors + int, launches alternating
    between tensors of GPU 0 and GPU 1 against the same loop with both sets on GPU 0 (and all on GPU 1, which needs
    a context switch from the caller's GPU 0), round-robin as above."""
    if torch.cuda.device_count() < 2:
        return [["alternating GPU 0 / GPU 1", f"n/a ({torch.cuda.device_count()} GPU)", "", ""]]
    on = {d: [tuple(torch.randn(n, device=f"cuda:{d}") for _ in range(4)) + (n,) for _ in range(2)] for d in (0, 1)}
    loops = {"all on GPU 0": (on[0][0], on[0][1]), "alternating GPU 0 / GPU 1": (on[0][0], on[1][0]),
             "all on GPU 1 (caller's current device: GPU 0)": (on[1][0], on[1][1])}

    def batch(first, second):
        def run():
            t0 = time.perf_counter()
            for _ in range(BATCH // 2):
                k((1,), (32,), first)
                k((1,), (32,), second)
            return (time.perf_counter() - t0) * 1e6
        return run

    def sync():
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)

    runs = {name: batch(*args) for name, args in loops.items()}
    for run in runs.values():
        run()   # the first launch on GPU 1 resolves the kernel there (full path); the rest take the shortcut
    sync()
    samples = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, run in runs.items():
            sync()
            samples[name].append(run() / (BATCH // 2 * 2))
            sync()
    med = {name: statistics.median(v) for name, v in samples.items()}
    base = med["all on GPU 0"]
    rows = []
    for name, us in med.items():
        ratio = us / base
        goal = ""
        if name.startswith("alternating"):
            goal = f"<= {ALTERNATING_GOAL}x " + ("ok" if ratio <= ALTERNATING_GOAL else "MISSED")
        rows.append([name, f"{us:.3f}", f"{ratio:.3f}x", goal])
    return rows


def main():
    print(f"bench_launch: measuring {use_jitbridge()}")
    import jitbridge
    if not jitbridge.driver_info()["devices"]:
        print("bench_launch: no GPU here; nothing to measure")
        return 0
    import numpy as np
    np.row_stack = np.vstack
    import torch

    n = 32
    k = jitbridge.RawKernel(SRC, "k")
    ta, tb, tc, td = (torch.randn(n, device="cuda") for _ in range(4))
    variants = []   # (name, batch runner returning microseconds, sync)
    unavailable = []

    def add(name, make):
        try:
            run, sync = make()
            run()  # first call: compile, load, warm up
            sync()
            variants.append((name, run, sync))
        except Exception as e:  # a missing or failing peer is reported, not fatal
            unavailable.append((name, f"n/a ({type(e).__name__}: {str(e)[:50]})"))

    sync_torch = torch.cuda.synchronize
    # The floors are test hooks (jitbridge_testing, built with the tests), never in the shipped module.
    hooks = testing_hooks()

    def need_hooks():
        if hooks is None:
            raise RuntimeError("jitbridge_testing is not built (the build tree's tests)")
        return hooks

    add(RAW, lambda: ((lambda: need_hooks().raw_launch_batch(k, 1, 32, (ta, tb, tc, td, n), BATCH)), sync_torch))
    # The driver's other parameter form, one buffer (cuLaunchKernel's `extra`), against the raw row's array of
    # pointers (which jitbridge's launches use, up to kMaxParamPointers parameters): what the form alone changes.
    add("raw cuLaunchKernel, parameters as one buffer (C++ loop)",
        lambda: ((lambda: need_hooks().raw_launch_batch(k, 1, 32, (ta, tb, tc, td, n), BATCH, buffer_form=True)),
                 sync_torch))
    add("python loop harness (empty lambda)", lambda: (python_batch(lambda: None), lambda: None))
    floor = hooks.prepared(k, (1,), (32,), (ta, tb, tc, td, n)) if hooks else None
    add(FLOOR, lambda: (python_batch(lambda: floor()), sync_torch) if floor else need_hooks())
    # The least any launch taking torch tensors must do: the call, torch's own exchange-API calls for
    # each tensor's address and for its current stream, cuLaunchKernel. No checks at all.
    add(TORCH_FLOOR, lambda: (python_batch(lambda: floor(ta, tb, tc, td, n)), sync_torch) if floor else need_hooks())
    add("jitbridge, 4 torch tensors + int", lambda: (python_batch(lambda: k((1,), (32,), (ta, tb, tc, td, n))), sync_torch))
    kk = k[1, 32]
    add("jitbridge k[1, 32](...), torch tensors", lambda: (python_batch(lambda: kk(ta, tb, tc, td, n)), sync_torch))

    def cupy_variants():
        import cupy as cp
        ca, cb, cc, cd = (cp.random.standard_normal(n, dtype=cp.float32) for _ in range(4))
        sync = cp.cuda.get_current_stream().synchronize
        add("jitbridge, 4 CuPy arrays + int", lambda: (python_batch(lambda: k((1,), (32,), (ca, cb, cc, cd, n))), sync))
        ck = cp.RawKernel(SRC, "k")
        n32 = np.int32(n)
        add("CuPy RawKernel, CuPy arrays", lambda: (python_batch(lambda: ck((1,), (32,), (ca, cb, cc, cd, n32))), sync))
        add("CuPy RawKernel, torch tensors via cupy.asarray", lambda: (python_batch(
            lambda: ck((1,), (32,), (cp.asarray(ta), cp.asarray(tb), cp.asarray(tc), cp.asarray(td), n32))), sync_torch))

    def numba_variants():
        from numba import cuda
        na, nb, nc, nd = (cuda.to_device(np.random.standard_normal(n).astype(np.float32)) for _ in range(4))
        add("jitbridge, 4 Numba arrays + int", lambda: (python_batch(lambda: k((1,), (32,), (na, nb, nc, nd, n))),
                                                         cuda.synchronize))

        @cuda.jit
        def nk(a, b, c, d, m):
            i = cuda.grid(1)
            if i < m:
                c[i] = a[i] + b[i]
                d[i] = a[i] * b[i]
        add("Numba cuda.jit, Numba arrays", lambda: (python_batch(lambda: nk[1, 32](na, nb, nc, nd, n)), cuda.synchronize))
        add("Numba cuda.jit, torch tensors", lambda: (python_batch(lambda: nk[1, 32](ta, tb, tc, td, n)), cuda.synchronize))

    def cuda_core():
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
        dev = Device(0)
        dev.set_current()
        arch = "sm_" + "".join(map(str, dev.compute_capability))
        kernel = Program(SRC, "c++", ProgramOptions(arch=arch)).compile("cubin").get_kernel("k")
        stream = dev.create_stream()
        config = LaunchConfig(grid=1, block=32)
        ptrs = [t.data_ptr() for t in (ta, tb, tc, td)]
        n32 = np.int32(n)
        return python_batch(lambda: launch(stream, config, kernel, *ptrs, n32)), stream.sync

    def triton_variant():
        import triton
        import triton.language as tl

        @triton.jit
        def tk(a, b, c, d, m, BLOCK: tl.constexpr):
            i = tl.arange(0, BLOCK)
            mask = i < m
            x = tl.load(a + i, mask=mask)
            y = tl.load(b + i, mask=mask)
            tl.store(c + i, x + y, mask=mask)
            tl.store(d + i, x * y, mask=mask)
        return python_batch(lambda: tk[(1,)](ta, tb, tc, td, n, BLOCK=32)), sync_torch

    for group in (cupy_variants, numba_variants):
        try:
            group()
        except Exception as e:
            unavailable.append((group.__name__, f"n/a ({type(e).__name__}: {str(e)[:50]})"))
    add("cuda.core 1.x launch, raw pointers (no checks)", cuda_core)
    add("Triton, torch tensors", triton_variant)

    samples = {name: [] for name, _, _ in variants}
    for _ in range(ROUNDS):
        for name, run, sync in variants:
            sync()
            samples[name].append(run() / BATCH)
            sync()
    med = {name: statistics.median(v) for name, v in samples.items()}
    if RAW not in med:
        print(f"bench_launch: no raw cuLaunchKernel floor to compare with ({dict(unavailable).get(RAW, 'n/a')}); "
              "measure the build tree (bash scripts/setup builds jitbridge_testing)")
        return 1
    raw = med[RAW]
    harness = med["python loop harness (empty lambda)"]
    table = []
    for name, _, _ in variants:
        if name.startswith("python loop harness"):
            continue
        net = med[name] if name.startswith("raw ") else med[name] - harness
        ratio = net / raw
        verdict = ""
        if name in GOALS and GOALS[name][0] in samples:
            ref, most = GOALS[name]
            paired = statistics.median(net_us(samples, name, r) / net_us(samples, ref, r) for r in range(ROUNDS))
            verdict = f"{paired:.3f}x {GOAL_NAMES[ref]} <= {most}x " + ("ok" if paired <= most else "MISSED")
        table.append([name, f"{med[name]:.2f}", f"{net:.2f}", f"{ratio:.2f}x", verdict])
    for name, why in unavailable:
        table.append([name, why, "", "", ""])
    phases = {}
    for _ in range(5 if hooks else 0):
        for name, us in hooks.launch_phases(k, (1,), (32,), (ta, tb, tc, td, n), 2000).items():
            phases[name] = min(phases.get(name, 1e9), us)
        torch.cuda.synchronize()
    if phases:
        print_table("jitbridge's Python launch path, 4 torch tensors + int: each phase alone in a C++ loop (us per "
                    "call)", ["phase", "us"], [[name, f"{us:.4f}"] for name, us in phases.items()], key="launch_phases")
    else:
        print("\n(the launch phases table: n/a, jitbridge_testing is not built; bash scripts/setup builds it)")
    steps = cpp_steps()
    if steps is None:
        print("\n(jitbridge's C++ launch table: n/a, the C++ benches are not built; bash scripts/setup builds them)")
    else:
        print_table("jitbridge's C++ launch, separate process (us per call; step_* rows: each step alone)",
                    ["measurement", "us"], [[k, f"{v:.4f}"] for k, v in steps.items()], key="launch_cpp")
    print_table(f"Host time per launch, grid 1 x block 32: median over {ROUNDS} round-robin rounds of {BATCH} "
                f"launches; net = minus the Python loop harness ({harness:.3f} us)",
                ["launch", "us", "net us", "net vs raw", "goal"], table, key="launch_host")
    print_table(f"Alternating devices: jitbridge, 4 torch tensors + int, grid 1 x block 32, us per launch (median "
                f"over {ROUNDS} round-robin rounds of {BATCH} launches, Python loop included)",
                ["launches", "us", "vs all on GPU 0", "goal"], alternating_devices(k, torch, n), key="launch_devices")
    if TORCH_FLOOR in med:
        floor_net = med[TORCH_FLOOR] - harness
        budget = (GOALS["jitbridge, 4 torch tensors + int"][1] - 1) * floor_net
        print(f"torch goal: it allows {budget:.2f} us over the floor with torch's own calls ({floor_net:.2f} us, "
              f"{floor_net / raw:.2f}x raw) for every check jitbridge makes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
