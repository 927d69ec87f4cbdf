"""constant_memory.py — a kernel reading __constant__ memory, filled through RawModule.get_global."""
import numpy as np
import torch

import jitbridge

module = jitbridge.RawModule(code=r'''
__constant__ float coefficients[4];
extern "C" __global__ void poly(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = coefficients[0] + v * (coefficients[1] + v * (coefficients[2] + v * coefficients[3]));
  }
}''')
coeffs = np.random.default_rng().standard_normal(4).astype(np.float32)
constant = torch.from_dlpack(module.get_global("coefficients"))   # 16 bytes of __constant__ memory
constant.copy_(torch.from_numpy(coeffs.view(np.uint8)))
n = 4096
x = torch.randn(n, device="cuda")
y = torch.full_like(x, float("nan"))
module.get_function("poly")[(n + 255) // 256, 256](x, y, n)
c = torch.from_numpy(coeffs).cuda()
torch.testing.assert_close(y, c[0] + x * (c[1] + x * (c[2] + x * c[3])), rtol=1e-5, atol=1e-5)
print("constant_memory: ok")
