"""gpu_frameworks.py — what the GPU test files share: a slow copy kernel for stream tests, importing each
framework (skipping the test cleanly when it is missing or sees no GPU), and the marker for tests that use
made-up device addresses."""
import os

import numpy as np
import pytest

import jitbridge

# Tests that describe arrays at made-up device addresses (packing and viewing never dereference them) need
# at most one GPU: with several, a __cuda_array_interface__ address's device is asked of the driver, which
# rightly does not know a made-up one.
MADE_UP_ADDRESSES = pytest.mark.skipif(len(jitbridge.driver_info()["devices"]) > 1,
                                       reason="made-up device addresses: with several GPUs the driver is asked "
                                              "which one an address is on")

N = 1 << 22
# ~0.2 s at 2 GHz: long enough that a consumer's work is queued behind it. Under compute-sanitizer the host side
# runs many times slower, so scripts/gpu-sanitize scales it (JITBRIDGE_TEST_SPIN_SCALE).
SPIN_CYCLES = 400_000_000 * int(os.environ.get("JITBRIDGE_TEST_SPIN_SCALE", "1"))

SPIN_COPY = r"""
extern "C" __global__ void spin_copy(float* out, const float* src, long long cycles, int n) {
  long long start = clock64();
  while (clock64() - start < cycles) { }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = src[i];
}
"""


def need_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    return torch


def need_cupy():
    return pytest.importorskip("cupy")


def need_numba():
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack  # numba still names it; NumPy 2.5 removed it
    return pytest.importorskip("numba.cuda")


def need_jax():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave GPU memory to the others
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    return jax, jnp
