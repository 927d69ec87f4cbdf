"""RawKernel / RawModule on the GPU: every framework, streams, CUDA graphs, launch options, limits, examples.
Faults and lifetimes: test_lifetime_gpu.py.

Inputs are fresh random data, outputs are poisoned before each launch and compared with a reference."""
import os
import subprocess
import sys

import numpy as np
import pytest

import jitbridge
from testing_hooks import hooks

pytestmark = pytest.mark.gpu

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}'''
COPY = r'''
extern "C" __global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}'''
SLOW_FILL = r'''
extern "C" __global__ void slow_fill(float* y, float v, int n, long long spins) {
  long long t0 = clock64(); while (clock64() - t0 < spins) {}
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = v;
}'''
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "launch")


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def saxpy():
    return jitbridge.RawKernel(SAXPY, "saxpy")


def test_torch_both_call_forms(gpu, torch, saxpy):
    n = 100_003
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    expected = 1.5 * x + y
    saxpy((n + 255) // 256, 256, (1.5, x, y, n))
    torch.testing.assert_close(y, expected)
    saxpy[(n + 255) // 256, 256](-1.5, x, y, n)
    torch.testing.assert_close(y, expected - 1.5 * x)


def test_follows_torch_current_stream_and_explicit_streams(gpu, torch):
    spin = jitbridge.RawKernel(SLOW_FILL, "slow_fill")
    copy = jitbridge.RawKernel(COPY, "copy")
    n = 1 << 16
    a = torch.full((n,), float("nan"), device="cuda")
    b = torch.full((n,), float("nan"), device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        spin[(n + 255) // 256, 256](a, 7.0, n, 20_000_000)   # on s: torch's current stream here
        copy[(n + 255) // 256, 256](a, b, n)                  # same stream: ordered after the slow fill
    s.synchronize()
    assert torch.all(b == 7.0)
    s2 = torch.cuda.Stream()
    c = torch.full((n,), float("nan"), device="cuda")
    spin((n + 255) // 256, 256, (a, 3.0, n, 20_000_000), stream=s2)   # torch.cuda.Stream object
    copy((n + 255) // 256, 256, (a, c, n), stream=s2.cuda_stream)     # int handle
    s2.synchronize()
    assert torch.all(c == 3.0)


def test_cupy_arrays_on_cupy_current_stream(gpu, saxpy):
    cp = pytest.importorskip("cupy")
    n = 50_000
    x = cp.random.standard_normal(n, dtype=cp.float32)
    y = cp.random.standard_normal(n, dtype=cp.float32)
    expected = 2.0 * x + y
    # x, y and expected are computed on the legacy stream, which a non-blocking stream does not wait for: without
    # this sync the launch below raced them (seen under compute-sanitizer, where timings shift).
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        saxpy((n + 127) // 128, 128, (2.0, x, y, n))
    stream.synchronize()
    cp.testing.assert_allclose(y, expected, rtol=1e-6)


def test_follows_cupy_current_stream_on_both_paths(gpu):
    cp = pytest.importorskip("cupy")
    import cupy_backends.cuda.stream as backend
    testing = hooks.optional()  # which reader _core took is a side point: checked where the module is built
    if testing is not None and "get_stream_ptr" in getattr(backend, "__pyx_capi__", {}):  # CuPy's C function
        assert testing.cupy_stream_reader() == "cupy_backends.cuda.stream.get_stream_ptr"
    spin = jitbridge.RawKernel(SLOW_FILL, "slow_fill")
    copy = jitbridge.RawKernel(COPY, "copy")
    n = 1 << 16
    for call in range(4):   # the first call takes the full path, later ones the shortcut
        a = cp.full((n,), float("nan"), dtype=cp.float32)
        b = cp.full((n,), float("nan"), dtype=cp.float32)
        cp.cuda.Device().synchronize()
        s = cp.cuda.Stream(non_blocking=True)   # a new stream each time: nothing remembered may be stale
        spin((n + 255) // 256, 256, (a, float(call), n, 20_000_000), stream=s.ptr)
        with s:
            copy((n + 255) // 256, 256, (a, b, n))   # on s (CuPy's current stream), so after the slow fill
        s.synchronize()
        assert bool(cp.all(b == call)), f"call {call}: the copy did not run on CuPy's current stream"


def test_numba_and_jax_arrays(gpu, saxpy):
    np.row_stack = np.vstack
    cuda = pytest.importorskip("numba.cuda")
    rng = np.random.default_rng()
    n = 4096
    hx, hy = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    x, y = cuda.to_device(hx), cuda.to_device(hy)
    saxpy(n // 128, 128, (0.5, x, y, n))
    np.testing.assert_allclose(y.copy_to_host(), 0.5 * hx + hy, rtol=1e-6)
    jnp = pytest.importorskip("jax.numpy")
    jx = jnp.asarray(hx)
    out = jitbridge.empty((n,), "float32")
    copy = jitbridge.RawKernel(COPY, "copy")
    copy(n // 128, 128, (jx, out, n))   # a JAX array into const float*
    jitbridge.synchronize()
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(out)), hx)


def test_cuda_graph_capture_and_replay(gpu, torch, saxpy):
    n = 10_000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    y0 = y.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        saxpy[(n + 255) // 256, 256](1.0, x, y, n)  # warm-up outside capture (loads the module)
    torch.cuda.current_stream().wait_stream(s)
    y.copy_(y0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        saxpy[(n + 255) // 256, 256](1.0, x, y, n)
    torch.cuda.synchronize()
    y.copy_(y0)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, y0 + 3 * x)


def test_cupy_graph_capture(gpu, saxpy):
    cp = pytest.importorskip("cupy")
    n = 4096
    x = cp.random.standard_normal(n, dtype=cp.float32)
    y = cp.random.standard_normal(n, dtype=cp.float32)
    y0 = y.copy()
    cp.cuda.Device().synchronize()  # made on the legacy stream, which the non-blocking stream does not wait for
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        saxpy(n // 256, 256, (2.0, x, y, n))
        stream.begin_capture()
        saxpy(n // 256, 256, (2.0, x, y, n))
        graph = stream.end_capture()
        graph.launch()
        graph.launch()
    stream.synchronize()
    cp.testing.assert_allclose(y, y0 + 6.0 * x, rtol=1e-5, atol=1e-5)


def test_dynamic_shared_memory_above_48k(gpu, torch):
    k = jitbridge.RawKernel(r'''
extern "C" __global__ void reverse(const float* x, float* y, int n) {
  extern __shared__ float tile[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = x[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = tile[n - 1 - i];
}''', "reverse")
    n = 25_000  # 100 KB of shared memory
    x = torch.randn(n, device="cuda")
    y = torch.full_like(x, float("nan"))
    k(1, 256, (x, y, n), shared_mem=n * 4)
    torch.testing.assert_close(y, x.flip(0))
    with pytest.raises(ValueError, match=r"shared_mem: .* exceed cuda:0's limit of \d+ bytes per block"):
        k(1, 256, (x, y, n), shared_mem=1 << 20)


def test_block_too_large_names_the_limit(gpu, torch, saxpy):
    x = torch.randn(8, device="cuda")
    with pytest.raises(ValueError, match="block: 2048 threads exceed cuda:0's limit of 1024 per block"):
        saxpy(1, 2048, (1.0, x, x, 8))
    bounded = jitbridge.RawKernel('extern "C" __global__ void __launch_bounds__(128) b(float* x) {}', "b")
    with pytest.raises(ValueError, match="b's limit of 128 per block"):
        bounded(1, 256, (x,))


def test_host_memory_wrong_dtype_and_count_on_gpu(gpu, torch, saxpy):
    x = torch.randn(8, device="cuda")
    with pytest.raises(ValueError, match="cpu memory"):
        saxpy(1, 32, (1.0, torch.randn(8), x, 8))
    with pytest.raises(TypeError, match="'float\\*' takes float32"):
        saxpy(1, 32, (1.0, x.double(), x, 8))
    with pytest.raises(TypeError, match="takes 4 arguments, 2 given"):
        saxpy(1, 32, (1.0, x))
    with pytest.raises(OverflowError, match="does not fit in 'int'"):
        saxpy(1, 32, (1.0, x, x, 2 ** 40))


def test_arrays_on_two_devices_are_refused(gpu, torch, saxpy):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    a, b = torch.randn(8, device="cuda:0"), torch.randn(8, device="cuda:1")
    with pytest.raises(ValueError, match="on cuda:1 but argument 1 is on cuda:0"):
        saxpy(1, 32, (1.0, a, b, 8))
    c = torch.randn(8, device="cuda:1")
    before = c.clone()
    current = torch.cuda.current_device()
    saxpy(1, 32, (2.0, b, c, 8))  # modules load on the second device at first use
    assert torch.cuda.current_device() == current   # the launch went to cuda:1 without switching the caller
    torch.cuda.synchronize(1)
    torch.testing.assert_close(c, before + 2 * b)


def test_cluster_and_cooperative_launches(gpu, torch):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("clusters need compute capability 9.0")
    k = jitbridge.RawKernel(r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void rank(int* out) {
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) out[blockIdx.x] = (int)cluster.block_rank();
}''', "rank")
    out = torch.full((8,), -1, dtype=torch.int32, device="cuda")
    k(8, 32, (out,), cluster=(2, 1, 1))
    assert out.tolist() == [0, 1] * 4
    with pytest.raises(ValueError, match="does not divide the grid"):
        k(7, 32, (out,), cluster=(2, 1, 1))
    g = jitbridge.RawKernel(r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void two_phase(int* data, int n) {
  cg::grid_group grid = cg::this_grid();
  int i = grid.thread_rank();
  if (i < n) data[i] = i;
  grid.sync();                                 // every write above is visible below
  int mirrored = i < n ? data[n - 1 - i] : 0;
  grid.sync();                                 // every read is done before anyone writes
  if (i < n) data[i] = mirrored;
}''', "two_phase")
    n = 64 * 128
    data = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    g(64, 128, (data, n), cooperative=True)
    assert torch.equal(data, torch.arange(n - 1, -1, -1, dtype=torch.int32, device="cuda"))


def test_attributes_occupancy_and_resources(gpu, saxpy):
    attrs = saxpy.attributes
    assert attrs["num_regs"] == saxpy.resources.registers == saxpy.num_regs
    assert attrs["max_threads_per_block"] == 1024
    assert saxpy.local_size_bytes == saxpy.resources.local_bytes
    min_grid, block = saxpy.suggest_block_size()
    assert min_grid > 0 and 32 <= block <= 1024
    assert saxpy.max_active_blocks_per_sm(256) >= 1


def test_module_from_a_cubin_file_packs_unchecked(gpu, torch, tmp_path):
    prog = jitbridge.compile(SAXPY)
    path = tmp_path / "saxpy.cubin"
    path.write_bytes(prog.cubin)
    m = jitbridge.RawModule(path=path)
    assert "saxpy" in m.kernel_names()
    k = m.get_function("saxpy")
    assert k.signature is None
    n = 1000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    expected = 4.0 * x + y
    k(4, 256, (4.0, x, y, n))
    torch.testing.assert_close(y, expected)


def test_device_globals(gpu, torch):
    m = jitbridge.RawModule(code=r'''
__device__ int counter;
extern "C" __global__ void bump() { atomicAdd(&counter, 1); }''')
    counter = torch.from_dlpack(m.get_global("counter")).view(torch.int32)
    counter.zero_()
    m.get_function("bump")(4, 64, ())
    torch.cuda.synchronize()
    assert counter.item() == 256
    with pytest.raises(KeyError, match="no __device__ or __constant__ variable 'nope'"):
        m.get_global("nope")


@pytest.mark.parametrize("example", sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")))
def test_examples_run(gpu, example):
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, example)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert ": ok" in out.stdout
