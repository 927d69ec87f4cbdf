"""Pickled kernels launched in a spawned process: a RawKernel, a RawModule and a get_function("scale<float>")
kernel are unpickled in a child (multiprocessing "spawn"), compiled (or read from the cache) there, launched on
torch arrays, and the results checked here against NumPy references."""

import multiprocessing
import pickle

import numpy as np
import pytest

import jitbridge

pytestmark = pytest.mark.gpu

SOURCE = r"""
template <class T> __global__ void scale(T* x, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void shift(const float* x, float* out, float by, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + by;
}
"""
N = 3000


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(N).astype(np.float32) for _ in range(4)]


def _child(data, seed):
    """Unpickles the three kernels, launches each once on torch arrays, returns the results as NumPy arrays."""
    import pickle as p

    import torch

    k, module, scale = p.loads(data)
    x, y, z, w = (torch.from_numpy(a).cuda() for a in _inputs(seed))
    grid = (N + 255) // 256
    k(grid, 256, (2.5, x, y, N))                     # RawKernel: y = 2.5 x + y
    out = torch.full_like(w, float("nan"))           # poisoned output
    module.get_function("shift")(grid, 256, (w, out, -1.25, N))
    scale[grid, 256](z, 3.0, N)                      # get_function kernel, Numba's call form
    torch.cuda.synchronize()
    return y.cpu().numpy(), out.cpu().numpy(), z.cpu().numpy(), k.program.origin


def test_pickled_kernels_launch_in_a_spawned_process(gpu):
    pytest.importorskip("torch")
    k = jitbridge.RawKernel(SOURCE, "axpy")
    module = jitbridge.RawModule(code=SOURCE, name_expressions=["scale<float>"])
    data = pickle.dumps((k, module, module.get_function("scale<float>")))
    seed = int(np.random.default_rng().integers(1 << 31))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        y, shifted, z, origin = pool.apply(_child, (data, seed))
        # A worker that exits (leaving the block would kill it) runs its exit handlers: they remove its
        # directory in /tmp.
        pool.close()
        pool.join()
    x0, y0, z0, w0 = _inputs(seed)
    np.testing.assert_allclose(y, 2.5 * x0 + y0, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(shifted, w0 - 1.25, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(z, 3.0 * z0, rtol=1e-6, atol=1e-6)
    assert origin in ("compiled", "disk")  # a fresh process: compiled there or read from the disk cache
