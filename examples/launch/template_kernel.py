"""template_kernel.py — a templated kernel instantiated through name expressions."""
import torch

import jitbridge

module = jitbridge.RawModule(code=r'''
template <class T, int UNROLL>
__global__ void scale(const T* in, T* out, T factor, int n) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
  #pragma unroll
  for (int u = 0; u < UNROLL; ++u)
    if (base + u < n) out[base + u] = in[base + u] * factor;
}''', name_expressions=["scale<float, 4>", "scale<double, 2>"])

for name, dtype, unroll in (("scale<float, 4>", torch.float32, 4), ("scale<double, 2>", torch.float64, 2)):
    k = module.get_function(name)
    n = 10_001
    x = torch.randn(n, device="cuda", dtype=dtype)
    out = torch.full_like(x, float("nan"))
    threads = 128
    k[(n + threads * unroll - 1) // (threads * unroll), threads](x, out, 1.75, n)
    torch.testing.assert_close(out, x * 1.75)
    print(f"{name}{k.signature}: ok")
