"""numba_saxpy.py — the same kernel on Numba device arrays (through __cuda_array_interface__)."""
import numpy as np

np.row_stack = np.vstack  # numba 0.68 still names it; NumPy 2.5 removed it
from numba import cuda  # noqa: E402

import jitbridge  # noqa: E402

saxpy = jitbridge.RawKernel(r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}''', "saxpy")

rng = np.random.default_rng()
n = 1 << 20
hx = rng.standard_normal(n, dtype=np.float32)
hy = rng.standard_normal(n, dtype=np.float32)
x, y = cuda.to_device(hx), cuda.to_device(hy)
saxpy((n + 255) // 256, 256, (3.0, x, y, n))
np.testing.assert_allclose(y.copy_to_host(), 3.0 * hx + hy, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y
print("numba_saxpy: ok")
