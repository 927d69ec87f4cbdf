"""Stream lifetimes on the GPU (issue 23): every case of the issue's table, each in a fresh process.

A stream is dropped (CuPy destroys it) before the jitbridge array, view or DLPack export that used it; the process
must exit 0, the data must be right (random inputs, outputs poisoned first, compared with NumPy), and the free
device memory must come back (cuMemGetInfo through CuPy or torch, after a device synchronize, before and after
64 MiB per array). Device memory (jitbridge's stream-ordered allocations) and managed memory (CuPy's managed
allocator, viewed and written by jitbridge) alike. The CPU counterpart on the fake driver is test_stream_lifetimes.py.
"""
import os
import subprocess
import sys

import pytest

from conftest import package_env
from gpu_frameworks import need_cupy, need_torch

pytestmark = pytest.mark.gpu

CHILD = r'''
import gc, sys
import numpy as np
import jitbridge as jb
import cupy as cp

case, variant, N = sys.argv[1], sys.argv[2], int(sys.argv[3])   # N float32: 64 MiB per array, less under tools
rng = np.random.default_rng(abs(hash((case, variant))) % 2**32)
k = jb.RawKernel(r"""
extern "C" __global__ void affine(const float* x, float* y, float a, float b, int n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = a * x[i] + b;
}""", "affine")
GRID, BLOCK = 1024, 256


def settle():
    gc.collect()
    cp.cuda.runtime.deviceSynchronize()
    cp.get_default_memory_pool().free_all_blocks()
    cp.cuda.runtime.deviceSynchronize()
    return cp.cuda.runtime.memGetInfo()[0]


def stream(kind):
    return {"null": cp.cuda.Stream.null, "ptds": cp.cuda.Stream.ptds,
            "new": cp.cuda.Stream(non_blocking=True)}[kind]


MANAGED = []


def managed_pool():
    MANAGED.append(cp.cuda.MemoryPool(cp.cuda.malloc_managed))
    cp.cuda.set_allocator(MANAGED[0].malloc)


x_host = rng.standard_normal(N, dtype=np.float32)
xd = cp.asarray(x_host)                      # the launches' input, alive until the end (CuPy frees on its own stream)
warm = cp.asarray(x_host); k(GRID, BLOCK, (warm, warm, 1.0, 0.0, N)); del warm
if case == "to_torch":                       # torch's own start-up memory is not the test's
    import torch
    torch.zeros(1, device="cuda")
before = settle()
out = expect = None
if case == "empty_like_in_with":             # empty_like(cupy_array) inside `with Stream`, stream dropped, then y
    x = cp.asarray(x_host)
    cp.cuda.runtime.deviceSynchronize()      # x's upload ran on the legacy stream, which a non-blocking one skips
    with cp.cuda.Stream(non_blocking=True):
        y = jb.empty_like(x)
        k(GRID, BLOCK, (x, y, 2.0, 1.0, N))
    cp.cuda.runtime.deviceSynchronize()      # the launch ran on the dropped stream, which .get() does not wait for
    assert isinstance(y, cp.ndarray), type(y)   # from CuPy's pool on CuPy's current stream (issue 28)
    out = cp.from_dlpack(y).get(); expect = 2 * x_host + 1
    del x, y
elif case == "empty_stream_object":          # empty(..., stream=<CuPy Stream>), stream dropped, then the array
    s = cp.cuda.Stream(non_blocking=True)
    y = jb.zeros(N, "float32", stream=s)
    del s
    gc.collect()
    z = cp.from_dlpack(y)
    assert float(z[:1000].sum()) == 0.0
    del y, z
elif case == "to_torch":                     # the same, handed to torch.from_dlpack, the torch tensor dropped last
    s = cp.cuda.Stream(non_blocking=True)
    y = jb.empty(N, "float32", stream=s)
    k(GRID, BLOCK, (xd, y, 3.0, 0.0, N), stream=s)
    t = torch.from_dlpack(y)
    del s, y
    gc.collect()
    out = t.cpu().numpy(); expect = 3 * x_host
    del t
elif case == "int_handle_current":           # empty(..., stream=<int>) of CuPy's current stream: its object is kept
    with cp.cuda.Stream(non_blocking=True) as s:
        y = jb.empty(N, "float32", stream=s.ptr)
        k(GRID, BLOCK, (xd, y, 1.0, 5.0, N), stream=s.ptr)
    del s
    gc.collect()
    out = cp.from_dlpack(y).get(); expect = x_host + 5
    del y
elif case == "int_handle_kept":              # an unowned int: the documented rule (the stream outlives the array)
    s = cp.cuda.Stream(non_blocking=True)
    y = jb.empty(N, "float32", stream=s.ptr)
    k(GRID, BLOCK, (xd, y, -1.0, 0.0, N), stream=s.ptr)
    out = cp.from_dlpack(y).get(); expect = -x_host
    del y
    gc.collect()
    s.synchronize(); del s
elif case in ("dlpack", "launch"):           # producer / consumer streams among null, ptds, new; new dropped first
    producer, consumer, memory = variant.split("-")
    if memory == "managed":
        managed_pool()
    x = cp.asarray(x_host)
    ps = stream(producer)
    with ps:
        # A jitbridge.Tensor on CuPy's current stream (given as its int; empty_like(x) would allocate from CuPy's pool)
        y = (jb.empty(N, "float32", stream=cp.cuda.get_current_stream().ptr) if memory == "device"
             else jb.as_array(cp.full(N, np.nan, dtype=cp.float32)))
        k(GRID, BLOCK, (x, y, 2.0, -1.0, N))
    cs = stream(consumer)
    if case == "dlpack":
        with cs:
            z = cp.from_dlpack(y)            # __dlpack__(stream=<cs>) on a jitbridge.Tensor / ArrayView
            w = z * 1.0
    else:
        z = cp.full(N, np.nan, dtype=cp.float32)
        k(GRID, BLOCK, (y, z, 1.0, 0.0, N), stream=cs)
        with cs:
            w = z * 1.0
    del ps, cs
    gc.collect()
    cp.cuda.runtime.deviceSynchronize()      # w was computed on cs, which CuPy's .get() does not wait for
    out = w.get(); expect = 2 * x_host - 1
    del x, y, w, z
else:
    raise SystemExit(f"unknown case {case}")
del xd
if expect is not None:
    np.testing.assert_allclose(out, expect, rtol=1e-6, atol=1e-6)
del out
cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)
for pool in MANAGED:
    gc.collect()
    pool.free_all_blocks()
after = settle()
print("FREE", before, after)
assert after >= before - (16 << 20), f"{(before - after) >> 20} MiB of device memory did not come back"
print("OK")
'''

CASES = [("empty_like_in_with", "-"), ("empty_stream_object", "-"), ("to_torch", "-"), ("int_handle_current", "-"),
         ("int_handle_kept", "-")]
CASES += [(case, f"{p}-{c}-{m}") for case in ("dlpack", "launch") for m in ("device", "managed")
          for p in ("null", "ptds", "new") for c in ("null", "ptds", "new")]
# Under scripts/gpu-sanitize (which scales the spin kernels), every child runs under compute-sanitizer: smaller
# arrays, and the pairings that involve a new stream only (the ones that crashed before the fix).
UNDER_TOOLS = os.environ.get("JITBRIDGE_TEST_SPIN_SCALE", "1") != "1"
N = (1 << 20) if UNDER_TOOLS else (16 << 20)
if UNDER_TOOLS:
    CASES = [(c, v) for c, v in CASES if v == "-" or ("new" in v and "ptds" not in v)]


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One kernel cache for all the children: the kernel is compiled once."""
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("case,variant", CASES, ids=[f"{c}[{v}]" for c, v in CASES])
def test_stream_dropped_before_the_array(gpu, case, variant, shared_cache, tmp_path):
    need_cupy()
    if case == "to_torch":
        need_torch()
    out = subprocess.run([sys.executable, "-c", CHILD, case, variant, str(N)], cwd=tmp_path, env=package_env(shared_cache),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    assert out.stdout.strip().endswith("OK"), out.stdout + out.stderr
