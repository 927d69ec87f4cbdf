"""mixed_frameworks.py — one launch taking a torch tensor, a CuPy array and a Numba array at once."""
import numpy as np

np.row_stack = np.vstack
import cupy as cp  # noqa: E402
import torch  # noqa: E402
from numba import cuda  # noqa: E402

import jitbridge  # noqa: E402

add3 = jitbridge.RawKernel(r'''
extern "C" __global__ void add3(const float* a, const float* b, const float* c, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i] + c[i];
}''', "add3")

n = 100_000
a = torch.randn(n, device="cuda")
b = cp.random.standard_normal(n, dtype=cp.float32)
hc = np.random.default_rng().standard_normal(n, dtype=np.float32)
c = cuda.to_device(hc)
out = torch.full((n,), float("nan"), device="cuda")
torch.cuda.synchronize()  # the CuPy and Numba inputs were written on their own streams
add3((n + 255) // 256, 256, (a, b, c, out, n))
torch.cuda.synchronize()
expected = a.cpu().numpy() + cp.asnumpy(b) + hc
np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-5)
print("mixed_frameworks: ok")
