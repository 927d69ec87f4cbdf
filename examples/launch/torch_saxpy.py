"""torch_saxpy.py — launch a kernel on PyTorch tensors; it runs on torch's current stream."""
import torch

import jitbridge

saxpy = jitbridge.RawKernel(r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}''', "saxpy")

n = 1 << 20
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
expected = 2.5 * x + y
saxpy((n + 255) // 256, 256, (2.5, x, y, n))          # CuPy's calling form
torch.testing.assert_close(y, expected)
saxpy[(n + 255) // 256, 256](-2.5, x, y, n)           # Numba's calling form
torch.testing.assert_close(y, expected - 2.5 * x)
print("torch_saxpy: ok")
