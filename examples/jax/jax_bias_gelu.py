"""jax_bias_gelu.py — example 1's fused bias + GELU op in JAX, from the very declaration the PyTorch op is made of
(BIAS_GELU in examples/torch/ops.py: kernels, arguments, output rules, save list, backward launches), trained in a
small JAX loop under jax.jit whose losses must match the same loop written in jax.numpy.

Needs a GPU, JAX with CUDA support, and PyTorch (ops.py registers the torch op from the declaration too).
Run: python3 examples/jax/jax_bias_gelu.py (named apart from examples/torch/fused_bias_gelu.py: both dirs go on sys.path)
bench/bench_jax.py and tests/python/test_jax_gpu.py import this module (fused_bias_gelu, reference)."""
import os
import sys

import jax
import jax.numpy as jnp

import jitbridge.jax as jj

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from ops import BIAS_GELU  # noqa: E402  (the shared declaration)

#: The op: x [..., C], bias [C] -> gelu_tanh(x + bias); differentiable in x and bias (jax.custom_vjp). Under
#: jax.vmap the forward kernel takes a batch of x as more rows (batch=: one call, not one per element); the backward
#: runs per element, as its bias gradient sums over rows (folding the batch in would sum over it too).
fused_bias_gelu = jj.custom_op(name="fused_bias_gelu", batch={"forward": ("x",)}, **BIAS_GELU)


def reference(x, bias):
    """What the op computes, in jax.numpy."""
    return jax.nn.gelu(x + bias, approximate=True)


def train(gelu, steps=30, seed=0, batch=256, width=512):
    """A two-layer regression (x @ w1 + b1 -> gelu -> @ w2) trained with SGD under jax.jit; returns the losses."""
    k = jax.random.split(jax.random.PRNGKey(seed), 5)
    x = jax.random.normal(k[0], (batch, 64), jnp.float32)
    target = jnp.sin(x @ jax.random.normal(k[1], (64, 8), jnp.float32))
    params = {"w1": jax.random.normal(k[2], (64, width), jnp.float32) * 0.1,
              "b1": jax.random.normal(k[3], (width,), jnp.float32) * 0.1,
              "w2": jax.random.normal(k[4], (width, 8), jnp.float32) * 0.05}

    def loss(p):
        h = gelu(x @ p["w1"], p["b1"])
        return jnp.mean((h @ p["w2"] - target) ** 2)

    @jax.jit
    def step(p):
        value, grads = jax.value_and_grad(loss)(p)
        return value, jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads)

    losses = []
    for _ in range(steps):
        value, params = step(params)
        losses.append(float(value))
    return losses


def main():
    ours, ref = train(fused_bias_gelu), train(reference)
    for i in (0, len(ours) // 2, len(ours) - 1):
        print(f"step {i:2d}: loss {ours[i]:.6f} (jax.numpy {ref[i]:.6f})")
    worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, ref))
    if worst > 1e-4 or not ours[-1] < ours[0]:
        raise SystemExit(f"FAILED: losses differ by up to {worst:.2e} relative, or did not go down")
    print(f"fused_bias_gelu (jax): ok, {len(ours)} steps, losses match jax.numpy within {worst:.1e} relative")


if __name__ == "__main__":
    main()
