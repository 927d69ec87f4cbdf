"""bench_launch.py — host microseconds per launch of k(const float*, const float*, float*, float*, int), grid 1 x
block 32, side by side: jitbridge (torch tensors, CuPy arrays, Numba arrays) and its peers, each as a ratio to raw
cuLaunchKernel from C++ measured in the same run. Needs a GPU; prints a table."""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import build_dir, print_table  # noqa: E402

SRC = r'''
extern "C" __global__ void k(const float* a, const float* b, float* c, float* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { c[i] = a[i] + b[i]; d[i] = a[i] * b[i]; }
}
'''
BATCH, REPS = 200, 40


def per_launch_us(launch, sync):
    for _ in range(3):  # warm-up batches
        for _ in range(BATCH):
            launch()
        sync()
    samples = []
    for _ in range(REPS):
        sync()
        t0 = time.perf_counter()
        for _ in range(BATCH):
            launch()
        samples.append((time.perf_counter() - t0) * 1e6 / BATCH)
    sync()
    return statistics.median(samples)


def cpp_floor():
    exe = os.path.join(build_dir(), "bench", "jitbridge_launch_bench")
    out = subprocess.run([exe], capture_output=True, text=True, check=True, timeout=300).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines() if line.strip())}


def main():
    import jitbridge
    if not jitbridge.driver_info()["devices"]:
        print("bench_launch: no GPU here; nothing to measure")
        return 0
    floor = cpp_floor()
    raw = floor["raw_culaunchkernel_us"]
    # What the Python timing loop itself costs per iteration (a loop calling an empty lambda): the
    # "net" column subtracts it from Python rows, so they compare the launch itself with C++.
    harness = per_launch_us(lambda: None, lambda: None)
    rows = [("raw cuLaunchKernel (C++)", raw), ("jitbridge C++ launch() (typed, checked)", floor["jitbridge_cpp_launch_us"])]
    cpp_rows = {name for name, _ in rows}
    results = {}

    import numpy as np
    np.row_stack = np.vstack
    import torch
    n = 32
    k = jitbridge.RawKernel(SRC, "k")
    ta, tb, tc, td = (torch.randn(n, device="cuda") for _ in range(4))
    sync_torch = torch.cuda.synchronize
    results["jitbridge, 4 torch tensors + int"] = per_launch_us(lambda: k((1,), (32,), (ta, tb, tc, td, n)), sync_torch)
    # Without the launch: argument conversion, checks and packing (plus building the returned list).
    results["(jitbridge k._pack(...) only, torch tensors; no launch)"] = per_launch_us(
        lambda: k._pack(ta, tb, tc, td, n), lambda: None)
    kk = k[1, 32]
    results["jitbridge k[1, 32](...), torch tensors"] = per_launch_us(lambda: kk(ta, tb, tc, td, n), sync_torch)

    def peer(name, make):
        try:
            launch, sync = make()
            results[name] = per_launch_us(launch, sync)
        except Exception as e:  # a missing or failing peer is reported, not fatal
            results[name] = f"n/a ({type(e).__name__}: {str(e)[:50]})"

    def cupy_variants():
        import cupy as cp
        ca, cb, cc, cd = (cp.random.standard_normal(n, dtype=cp.float32) for _ in range(4))
        sync = cp.cuda.get_current_stream().synchronize
        results["jitbridge, 4 CuPy arrays + int"] = per_launch_us(lambda: k((1,), (32,), (ca, cb, cc, cd, n)), sync)
        ck = cp.RawKernel(SRC, "k")
        results["CuPy RawKernel, CuPy arrays"] = per_launch_us(lambda: ck((1,), (32,), (ca, cb, cc, cd, np.int32(n))), sync)
        results["CuPy RawKernel, torch tensors via cupy.asarray"] = per_launch_us(
            lambda: ck((1,), (32,), (cp.asarray(ta), cp.asarray(tb), cp.asarray(tc), cp.asarray(td), np.int32(n))), sync_torch)
        return None, None

    def numba_variants():
        from numba import cuda
        na, nb, nc, nd = (cuda.to_device(np.random.standard_normal(n).astype(np.float32)) for _ in range(4))
        results["jitbridge, 4 Numba arrays + int"] = per_launch_us(lambda: k((1,), (32,), (na, nb, nc, nd, n)), cuda.synchronize)

        @cuda.jit
        def nk(a, b, c, d, m):
            i = cuda.grid(1)
            if i < m:
                c[i] = a[i] + b[i]
                d[i] = a[i] * b[i]
        results["Numba cuda.jit, Numba arrays"] = per_launch_us(lambda: nk[1, 32](na, nb, nc, nd, n), cuda.synchronize)
        results["Numba cuda.jit, torch tensors"] = per_launch_us(lambda: nk[1, 32](ta, tb, tc, td, n), cuda.synchronize)
        return None, None

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
        return (lambda: launch(stream, config, kernel, *ptrs, n32)), stream.sync

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
        return (lambda: tk[(1,)](ta, tb, tc, td, n, BLOCK=32)), sync_torch

    for fn in (cupy_variants, numba_variants):
        try:
            fn()
        except Exception as e:
            results[fn.__name__] = f"n/a ({type(e).__name__}: {str(e)[:50]})"
    peer("cuda.core 1.x launch, raw pointers", cuda_core)
    peer("Triton, torch tensors", triton_variant)

    rows += list(results.items())
    goals = {"jitbridge, 4 torch tensors + int": 1.15, "jitbridge, 4 CuPy arrays + int": 1.4,
             "jitbridge, 4 Numba arrays + int": 1.4}
    table = []
    for name, us in rows:
        if isinstance(us, float):
            net = us if name in cpp_rows else us - harness
            ratio = net / raw
            goal = goals.get(name)
            verdict = "" if goal is None else (f"<= {goal}x " + ("ok" if ratio <= goal else "MISSED"))
            table.append([name, f"{us:.2f}", f"{net:.2f}", f"{ratio:.2f}x", verdict])
        else:
            table.append([name, us, "", "", ""])
    steps = [[k[5:-3], f"{v:.4f}"] for k, v in floor.items() if k.startswith("step_")]
    print_table("Steps of jitbridge's C++ launch, each alone (us per call)", ["step", "us"], steps)
    print_table(f"Host time per launch, grid 1 x block 32 (median of {REPS} batches of {BATCH}); "
                f"net = minus the Python loop harness ({harness:.3f} us)",
                ["launch", "us", "net us", "net vs raw", "goal"], table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
