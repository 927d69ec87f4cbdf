"""bench_scalars.py — what a NumPy scalar argument costs over a Python number (issue 28; goal: at most 0.1 us more per
launch). Launches one kernel `k(float* y, double d, float f, int n)` through the full call path (the shortcut after
the first call) with Python numbers and with NumPy scalars of each kind in the scalar parameters, on torch arrays;
prints per-launch medians and the difference to the Python-number row. Needs a GPU and torch; exits 0 otherwise."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import fmt_us, gpu_jitbridge, median_us, print_table  # noqa: E402

import numpy as np  # noqa: E402

SRC = r'''
extern "C" __global__ void k(float* y, double d, float f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = (float)d + f;
}
'''
LAUNCHES = 2000



def main():
    jitbridge, torch = gpu_jitbridge("bench_scalars", "torch")
    y = torch.zeros(256, device="cuda")
    cases = [
        ("Python float, float, int", (1.5, 2.5, 256)),
        ("np.float64, np.float64, np.int64", (np.float64(1.5), np.float64(2.5), np.int64(256))),
        ("np.float32, np.float32, np.int32", (np.float32(1.5), np.float32(2.5), np.int32(256))),
        ("np.float16, np.float16, np.int16", (np.float16(1.5), np.float16(2.5), np.int16(256))),
        ("np.float32, Python float, int", (np.float32(1.5), 2.5, 256)),
        ("Python float, float, np.uint32", (1.5, 2.5, np.uint32(256))),
        ("Python float, float, int (again: the noise)", (1.5, 2.5, 256)),
    ]
    rows = []
    base = None
    for label, (d, f, n) in cases:
        args = (y, d, f, n)
        k = jitbridge.RawKernel(SRC, "k")  # a kernel per row: each keeps at most 4 shortcuts
        k(1, 256, args)  # the full path once: learns the shortcut for these types
        torch.cuda.synchronize()
        want = float(d) + float(np.float32(float(f)))
        assert abs(float(y[0]) - want) < 1e-3, (label, float(y[0]), want)

        def run():
            for _ in range(LAUNCHES):
                k(1, 256, args)

        us = median_us(run, repeat=9) / LAUNCHES
        torch.cuda.synchronize()
        base = us if base is None else base
        numpy_args = sum(type(v).__module__ == "numpy" for v in (d, f, n))
        per_arg = f"{(us - base) / numpy_args:+.3f} us" if numpy_args else "-"
        rows.append([label, fmt_us(us), f"{us - base:+.3f} us", per_arg, f"{us / base:.3f}x"])
    print_table(f"NumPy scalar arguments: per launch, k(float* y, double, float, int), {LAUNCHES} launches "
                "(goal: at most +0.1 us per NumPy argument)",
                ["arguments (d, f, n)", "per launch", "vs Python numbers", "per NumPy argument", "ratio"], rows,
                key="scalars")


if __name__ == "__main__":
    main()
