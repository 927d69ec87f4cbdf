"""jitbridge.benchmark on the GPU: a copy kernel's GB/s against torch's own copy bandwidth (torch.cuda.Event, same run),
comparisons, streams. Inputs are fresh random data, outputs are poisoned and checked after the timed calls."""
import statistics

import pytest

import jitbridge

pytestmark = pytest.mark.gpu

COPY4 = r'''
extern "C" __global__ void copy4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long long stride = (long long)gridDim.x * blockDim.x;
  for (; i < n4; i += stride) y[i] = x[i];
}'''


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def copy4():
    return jitbridge.RawKernel(COPY4, "copy4")


def launch_shape(kernel, n4):
    """One full wave of blocks (the occupancy API's minimum grid for full occupancy), grid-stride over n4."""
    min_grid, block = kernel.suggest_block_size()
    return max(1, min(min_grid, (n4 + block - 1) // block)), block


def torch_copy_gbps(torch, dst, src, nbytes, repeat):
    """Median GB/s of dst.copy_(src) timed with torch.cuda.Event pairs on torch's current stream."""
    for _ in range(5):
        dst.copy_(src)
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeat)]
    for a, b in pairs:
        a.record()
        dst.copy_(src)
        b.record()
    torch.cuda.synchronize()
    return nbytes / (statistics.median(a.elapsed_time(b) for a, b in pairs) * 1e-3) / 1e9


def test_copy_kernel_gbps_within_10_percent_of_torch_copy(gpu, torch, copy4):
    n = 64 * 1024 * 1024  # 256 MiB per array, far beyond any L2
    x = torch.randn(n, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    grid, block = launch_shape(copy4, n // 4)
    nbytes = 2 * n * 4
    ours, theirs = [], []
    for _ in range(3):  # alternating rounds, medians of each
        r = jitbridge.benchmark(copy4, grid, block, (x, y, n // 4), n_warmup=5, n_repeat=30, bytes=nbytes)
        assert r.name == "copy4" and len(r.gpu_ms) == 30 and all(v > 0 for v in r.gpu_ms) and len(r.host_us) == 30
        assert r.stream == torch.cuda.current_stream().cuda_stream or r.stream in (0, 1)
        ours.append(r.gbps)
        theirs.append(torch_copy_gbps(torch, torch.empty_like(x), x, nbytes, 30))
    assert torch.equal(y, x)  # every element copied (y was NaN)
    ours_gbps, torch_gbps = statistics.median(ours), statistics.median(theirs)
    print(f"copy: jitbridge.benchmark {ours_gbps:.1f} GB/s, torch copy_ {torch_gbps:.1f} GB/s")
    assert abs(ours_gbps - torch_gbps) <= 0.10 * torch_gbps, (ours, theirs)


def test_comparison_of_a_full_and_a_half_copy(gpu, torch, copy4):
    n = 32 * 1024 * 1024
    x = torch.randn(n, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    grid, block = launch_shape(copy4, n // 4)
    c = jitbridge.benchmark({"full": lambda: copy4(grid, block, (x, y, n // 4)),
                             "half": lambda: copy4(grid, block, (x, y, n // 8))}, n_warmup=3, n_repeat=20)
    assert list(c.results) == ["full", "half"] and c.baseline == "full"
    assert 0.3 < c.ratio("half") < 0.75, str(c)  # half the bytes: about half the time
    assert "time vs full" in str(c) and "<table" in c._repr_html_()
    assert torch.equal(y, x)
    # One CudaEventTimer for two calls: each call reads its own samples.
    timer = jitbridge.CudaEventTimer(args=(x,))
    one = jitbridge.benchmark(lambda: copy4(grid, block, (x, y, n // 4)), n_warmup=1, n_repeat=5, timer=timer)
    two = jitbridge.benchmark(lambda: copy4(grid, block, (x, y, n // 8)), n_warmup=1, n_repeat=7, timer=timer)
    assert len(one.gpu_ms) == 5 and len(two.gpu_ms) == 7 and two.median_ms < one.median_ms


def test_the_stream_timed(gpu, torch, copy4):
    n = 4 * 1024 * 1024
    x = torch.randn(n, device="cuda")
    grid, block = launch_shape(copy4, n // 4)
    s = torch.cuda.Stream()
    for how in ("stream=", "kwargs", "torch.cuda.stream"):
        y = torch.full((n,), float("nan"), device="cuda")
        torch.cuda.synchronize()  # x and y are ready before s uses them
        common = dict(n_warmup=2, n_repeat=10, flush_l2=False)
        if how == "stream=":  # given
            r = jitbridge.benchmark(copy4, grid, block, (x, y, n // 4), kwargs={"stream": s}, stream=s, **common)
        elif how == "kwargs":  # the launch's stream= is the one timed
            r = jitbridge.benchmark(copy4, grid, block, (x, y, n // 4), kwargs={"stream": s}, **common)
        else:  # torch's current stream, found from the tensors in the launch's argument tuple
            with torch.cuda.stream(s):
                r = jitbridge.benchmark(copy4, grid, block, (x, y, n // 4), **common)
        assert r.stream == s.cuda_stream, how
        assert r.flush_l2 is False and all(v > 0 for v in r.gpu_ms), how
        s.synchronize()
        assert torch.equal(y, x), how
