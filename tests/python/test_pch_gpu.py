"""On a GPU: cub kernels compiled before, while and after jitbridge makes an automatic precompiled header for their
shared #include compute the right block sums (the first compiles plain, the second makes the PCH and uses it, the
third uses it; cub's plain compile takes far over the 200 ms that qualify a prefix)."""
import uuid

import pytest

import jitbridge

pytestmark = pytest.mark.gpu

BLOCKS, THREADS = 64, 128


def cub_block_sum(scale, tag):
    # The leading #include is the PCH prefix; the trailing comment keeps the source new to the session's cache.
    return ("#include <cub/block/block_reduce.cuh>\n"
            'extern "C" __global__ void block_sum(const float* x, float* out) {\n'
            "  using R = cub::BlockReduce<float, 128>;\n"
            "  __shared__ typename R::TempStorage t;\n"
            f"  float v = R(t).Sum(x[blockIdx.x * 128 + threadIdx.x] * {scale}.0f);\n"
            "  if (threadIdx.x == 0) out[blockIdx.x] = v;\n"
            f"}}\n// {tag}\n")


def test_cub_kernels_around_an_automatic_pch_compute_block_sums(gpu):
    torch = pytest.importorskip("torch")
    tag = uuid.uuid4().hex
    kernels = [jitbridge.RawKernel(cub_block_sum(scale, tag), "block_sum") for scale in (1, 2, 3)]
    for scale, kernel in zip((1, 2, 3), kernels):
        x = torch.randn(BLOCKS * THREADS, device="cuda")
        out = torch.full((BLOCKS,), float("nan"), device="cuda")  # poison
        kernel(BLOCKS, THREADS, (x, out))
        torch.cuda.synchronize()
        expected = (x.double().view(BLOCKS, THREADS) * scale).sum(dim=1).float()
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-3)
