"""cupy_saxpy.py — the same kernel on CuPy arrays; it runs on CuPy's current stream."""
import cupy as cp

import jitbridge

saxpy = jitbridge.RawKernel(r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}''', "saxpy")

n = 1 << 20
x = cp.random.standard_normal(n, dtype=cp.float32)
y = cp.random.standard_normal(n, dtype=cp.float32)
expected = 0.5 * x + y
with cp.cuda.Stream(non_blocking=True):
    saxpy((n + 255) // 256, 256, (0.5, x, y, n))
    cp.cuda.get_current_stream().synchronize()
cp.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
print("cupy_saxpy: ok")
