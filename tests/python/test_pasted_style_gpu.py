"""test_pasted_style_gpu.py — kernels in the style of pasted training code on a GPU: three layer-norm forward
variants (standard headers, cooperative groups, __ldcs/__stcs, C++ linkage; tests/python/pasted_style_kernels.py)
against torch.nn.functional.layer_norm, a cooperative grid.sync() kernel at several grid sizes up to the precise
error for a grid that cannot be co-resident, and standard headers in a launched kernel."""

import pytest

import jitbridge
from pasted_style_kernels import KERNELS, LAYERNORM, SIGNATURE, launch_shape

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def layernorm_module():
    return jitbridge.RawModule(code=LAYERNORM, program_name="layernorm_forward.cu")


def test_pasted_style_layernorm_kernels_load_with_their_signatures(gpu, layernorm_module):
    names = layernorm_module.kernel_names()
    for name in KERNELS:  # C++ linkage: found by the demangled names
        assert name in names
        assert str(layernorm_module.get_function(name).signature) == SIGNATURE


@pytest.mark.parametrize("kernel,block_size", [
    ("ln_forward_warp_per_row", 256), ("ln_forward_warp_per_row", 96),
    ("ln_forward_block_per_row", 256), ("ln_forward_block_per_row", 1024), ("ln_forward_block_per_row", 32),
    ("ln_forward_cached_row", 128), ("ln_forward_cached_row", 96),
])
def test_pasted_style_layernorm_forward_matches_torch(gpu, torch, layernorm_module, kernel, block_size):
    B, T, C = 4, 33, 768  # N = 132 rows: not a multiple of the rows per block (a partial last block)
    N = B * T
    g = torch.Generator(device="cuda").manual_seed(1000 + KERNELS.index(kernel) * 7 + block_size)
    inp = torch.randn(B, T, C, device="cuda", generator=g) * 2.0 + 0.5
    weight = torch.randn(C, device="cuda", generator=g)
    bias = torch.randn(C, device="cuda", generator=g)
    out = torch.full((B, T, C), float("nan"), device="cuda")
    mean = torch.full((B, T), float("nan"), device="cuda")
    rstd = torch.full((B, T), float("nan"), device="cuda")
    before = inp.clone()
    k = layernorm_module.get_function(kernel)
    grid, shared = launch_shape(kernel, N, C, block_size)
    k(grid, block_size, (out, mean, rstd, inp, weight, bias, N, C), shared_mem=shared)
    torch.cuda.synchronize()

    x = inp.double()
    ref = torch.nn.functional.layer_norm(x, (C,), weight.double(), bias.double(), eps=1e-5)
    ref_mean = x.mean(dim=-1)
    ref_rstd = torch.rsqrt(x.var(dim=-1, unbiased=False) + 1e-5)
    assert not torch.isnan(out).any() and not torch.isnan(mean).any() and not torch.isnan(rstd).any()
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=2e-4)
    torch.testing.assert_close(mean.double(), ref_mean, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(rstd.double(), ref_rstd, rtol=1e-4, atol=1e-6)
    # torch's own float32 layer_norm agrees too.
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(inp, (C,), weight, bias, eps=1e-5),
                               rtol=1e-4, atol=2e-4)
    assert torch.equal(inp, before)  # the input was only read (variant C caches it, never writes it)


GRID_SYNC = r"""
#include <cooperative_groups.h>
#include <cstdint>
namespace cg = cooperative_groups;
extern "C" __global__ void rotate(std::int32_t* data, std::int32_t* out, int n) {
  cg::grid_group grid = cg::this_grid();
  const unsigned long long first = grid.thread_rank(), stride = grid.num_threads();
  for (unsigned long long j = first; j < (unsigned long long)n; j += stride) data[j] = (std::int32_t)(j * 3 + 1);
  grid.sync();  // every block's writes are visible to every other block below
  for (unsigned long long j = first; j < (unsigned long long)n; j += stride) out[j] = data[(j + 1) % n];
}
"""


def test_cooperative_grid_sync_at_several_sizes_and_the_precise_error(gpu, torch):
    k = jitbridge.RawKernel(GRID_SYNC, "rotate")
    block = 128
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    per_sm = k.max_active_blocks_per_sm(block)
    assert per_sm >= 1
    most = per_sm * sms
    for grid in sorted({1, 2, sms, most - 1, most}):
        if grid < 1:
            continue
        n = grid * block * 2 + 5  # every thread handles two or three elements, some wrap around
        data = torch.full((n,), -7, dtype=torch.int32, device="cuda")
        out = torch.full((n,), -7, dtype=torch.int32, device="cuda")
        k(grid, block, (data, out, n), cooperative=True)
        torch.cuda.synchronize()
        j = torch.arange(n, device="cuda", dtype=torch.int64)
        assert torch.equal(data, (j * 3 + 1).int()), grid
        assert torch.equal(out, (((j + 1) % n) * 3 + 1).int()), grid
    data = torch.full((16,), -7, dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError) as info:
        k(most + 1, block, (data, data, 16), cooperative=True)
    msg = str(info.value)
    assert f"a grid of {most + 1} blocks cannot be resident at once on cuda:0" in msg
    assert f"{per_sm} blocks of {block} threads" in msg
    assert f"x {sms} multiprocessors = {most} blocks at most" in msg
    torch.cuda.synchronize()
    assert torch.equal(data, torch.full((16,), -7, dtype=torch.int32, device="cuda"))  # nothing was launched
    # The same grid without cooperative= is an ordinary launch (no residency rule).
    k2 = jitbridge.RawKernel(r'extern "C" __global__ void one(int* x) { if (threadIdx.x == 0) x[blockIdx.x] = 1; }',
                             "one")
    flags = torch.zeros(most + 1, dtype=torch.int32, device="cuda")
    k2(most + 1, block, (flags,))
    torch.cuda.synchronize()
    assert int(flags.sum()) == most + 1


STD_HEADERS = r"""
#include <cmath>
#include <limits>
#include <complex>
#include <array>
#include <tuple>
#include <type_traits>
#include <climits>
#include <cfloat>
#include <math.h>
#include <stdint.h>
extern "C" __global__ void std_values(float* out, double* dout, int64_t* iout, float x) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  std::array<float, 3> a = {x, 2.0f * x, 3.0f * x};
  auto t = std::make_tuple(7, x);
  out[0] = std::numeric_limits<float>::max();
  out[1] = std::sqrt(x);
  out[2] = std::abs(std::complex<float>(3.0f * x, 4.0f * x));
  out[3] = a[0] + a[1] + a[2];
  out[4] = std::get<1>(t) + (float)std::get<0>(t);
  out[5] = FLT_EPSILON;
  out[6] = std::is_same<std::remove_cv_t<const float>, float>::value ? 1.0f : 0.0f;
  dout[0] = M_PI;
  dout[1] = std::numeric_limits<double>::epsilon();
  iout[0] = INT_MAX;
  iout[1] = std::numeric_limits<int64_t>::min();
}
"""


def test_std_headers_in_a_launched_kernel_give_the_standard_values(gpu, torch):
    import numpy as np

    k = jitbridge.RawKernel(STD_HEADERS, "std_values")
    out = torch.full((7,), float("nan"), device="cuda")
    dout = torch.full((2,), float("nan"), dtype=torch.float64, device="cuda")
    iout = torch.full((2,), -5, dtype=torch.int64, device="cuda")
    x = 2.25
    k(1, 32, (out, dout, iout, x))
    torch.cuda.synchronize()
    f32 = np.finfo(np.float32)
    want = [float(f32.max), 1.5, 5 * x, 6 * x, x + 7, float(f32.eps), 1.0]
    assert out.tolist() == pytest.approx(want, rel=1e-6)
    assert dout.tolist() == [np.pi, float(np.finfo(np.float64).eps)]
    assert iout.tolist() == [2**31 - 1, -2**63]
