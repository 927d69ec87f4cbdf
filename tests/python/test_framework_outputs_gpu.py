"""On a GPU: outputs like CuPy and Numba arrays come from those frameworks' allocators (issue 28): CuPy's pool
counters move, cupy.cuda.set_allocator is honoured, the arrays are CuPy's and Numba's own types, and a kernel writes
into them correctly (fresh random inputs, poisoned outputs, compared with NumPy)."""
import numpy as np
import pytest
from gpu_frameworks import need_cupy, need_numba

import jitbridge

pytestmark = pytest.mark.gpu

SCALE = r'''
extern "C" __global__ void scale(const float* x, float* y, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = s * x[i];
}'''


def test_cupy_outputs_come_from_cupys_pool(gpu):
    cp = need_cupy()
    pool = cp.get_default_memory_pool()
    x = cp.asarray(np.random.default_rng().standard_normal(1 << 20, dtype=np.float32))
    before = pool.used_bytes()
    y = jitbridge.empty_like(x)
    assert type(y) is cp.ndarray and y.shape == x.shape and y.dtype == x.dtype
    assert pool.used_bytes() - before >= x.nbytes
    z = jitbridge.zeros((1000,), "float64", like=x)
    assert type(z) is cp.ndarray and bool((z == 0).all())
    k = jitbridge.RawKernel(SCALE, "scale")
    s = cp.cuda.Stream(non_blocking=True)
    with s:   # on CuPy's current stream: poison, launch and the check
        cp.cuda.get_current_stream().wait_event(cp.cuda.Stream.null.record())   # x, y and z were made there
        y.fill(np.nan)
        k((x.size + 255) // 256, 256, (x, y, np.float32(2.5), x.size))
        assert np.array_equal(cp.asnumpy(y), cp.asnumpy(x) * np.float32(2.5))


def test_cupy_set_allocator_is_honoured(gpu):
    cp = need_cupy()
    seen = []
    pool = cp.cuda.MemoryPool()

    def allocate(size):
        seen.append(size)
        return pool.malloc(size)

    cp.cuda.set_allocator(allocate)
    try:
        y = jitbridge.empty((123, 7), "float32", like=cp.ndarray)
        assert type(y) is cp.ndarray and seen and seen[-1] >= 123 * 7 * 4
    finally:
        cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)


def test_numba_outputs_are_numba_arrays(gpu):
    cuda = need_numba()
    x = cuda.to_device(np.random.default_rng().standard_normal(5000).astype(np.float32))
    y = jitbridge.empty_like(x)
    assert type(y) is type(x) and y.shape == x.shape and y.dtype == x.dtype
    y.copy_to_device(np.full(5000, np.nan, np.float32))
    k = jitbridge.RawKernel(SCALE, "scale")
    k(20, 256, (x, y, np.float32(-1.5), 5000))
    assert np.array_equal(y.copy_to_host(), x.copy_to_host() * np.float32(-1.5))
    z = jitbridge.zeros((10, 3), "int32", like=x)
    assert type(z) is type(x) and not z.copy_to_host().any()
