"""jax_saxpy.py — JAX arrays in; the output is a jitbridge tensor handed to JAX without a copy."""
import numpy as np
import jax
import jax.numpy as jnp

import jitbridge

axpb = jitbridge.RawKernel(r'''
extern "C" __global__ void axpb(float a, const float* x, float b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + b;
}''', "axpb")

n = 1 << 16
x = jax.random.normal(jax.random.key(np.random.randint(1 << 30)), (n,), dtype=jnp.float32)
x.block_until_ready()
out = jitbridge.empty((n,), "float32")
axpb((n + 255) // 256, 256, (2.0, x, -1.0, out, n))
jitbridge.synchronize()
result = jnp.from_dlpack(out)
np.testing.assert_allclose(np.asarray(result), 2.0 * np.asarray(x) - 1.0, rtol=1e-5, atol=1e-6)
print("jax_saxpy: ok")
