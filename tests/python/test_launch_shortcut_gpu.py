"""The launch shortcut on the GPU: a call with the same argument types as an earlier successful one takes it.
Its results must equal the full path's, every check must still fire with the full path's message, the stream
rules must hold (current-stream changes, explicit streams, graph capture), and unusual calls must fall back.

Inputs are fresh random data each call; outputs are poisoned before each launch and compared with a reference."""
import numpy as np
import pytest

import jitbridge
from gpu_frameworks import N, SPIN_COPY, SPIN_CYCLES, need_cupy, need_numba, need_torch
from testing_hooks import hooks

pytestmark = pytest.mark.gpu

AXPBY = r'''
extern "C" __global__ void axpby(float a, const float* x, float b, float* y, int n, bool negate, const float* bias) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = a * x[i] + b * y[i] + (bias ? bias[i] : 0.0f);
    y[i] = negate ? -v : v;
  }
}'''


def kinds(kernel):
    return [(usable, how) for _, usable, how in hooks.kernel_shortcuts(kernel)]


def test_torch_calls_take_the_shortcut_and_compute_what_the_full_path_does(gpu):
    torch = need_torch()
    k = jitbridge.RawKernel(AXPBY, "axpby")
    for call in range(6):
        n = 1000 + 997 * call                      # new sizes and new tensors every call
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        bias = torch.randn(n, device="cuda") if call % 2 else None
        a, b, negate = float(np.random.uniform(-2, 2)), float(np.random.uniform(-2, 2)), bool(call % 3 == 0)
        expected = a * x + b * y + (bias if bias is not None else 0)
        expected = -expected if negate else expected
        k[(n + 127) // 128, 128](a, x, b, y, n, negate, bias)
        torch.testing.assert_close(y, expected)
    # Two type patterns (bias a tensor, bias None), both usable; the kinds say how each argument is read.
    assert sorted(kinds(k)) == sorted([
        (True, ("floating", "exchange_array", "floating", "exchange_array", "integer", "boolean", "null_pointer")),
        (True, ("floating", "exchange_array", "floating", "exchange_array", "integer", "boolean", "exchange_array")),
    ])


def test_every_check_still_fires_after_the_shortcut_is_learnt(gpu):
    torch = need_torch()
    k = jitbridge.RawKernel(AXPBY, "axpby")
    n = 4096
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    k[n // 128, 128](1.0, x, 1.0, y, n, False, None)
    assert kinds(k) == [(True, ("floating", "exchange_array", "floating", "exchange_array", "integer", "boolean",
                                "null_pointer"))]
    cases = [
        ((1.0, x.double(), 1.0, y, n, False, None), TypeError, "float64"),
        ((1.0, x.cpu(), 1.0, y, n, False, None), ValueError, "cpu"),
        ((1.0, x, 1.0, y, 2 ** 40, False, None), OverflowError, "does not fit"),
        ((1.0, x, 1.0, y, -(2 ** 31) - 1, False, None), OverflowError, "does not fit"),
        ((1e39, x, 1.0, y, n, False, None), OverflowError, "out of range"),
        ((1.0, x, 1.0, y, n, False), TypeError, "takes 7 arguments"),
    ]
    for args, error, words in cases:
        with pytest.raises(error, match=words):
            k[n // 128, 128](*args)
    with pytest.raises(ValueError, match="block: 2048 threads exceed"):
        k[1, 2048](1.0, x, 1.0, y, n, False, None)
    # and the shortcut still launches correctly afterwards
    y0 = torch.randn(n, device="cuda")
    y.copy_(y0)
    k[n // 128, 128](2.0, x, 0.5, y, n, True, None)
    torch.testing.assert_close(y, -(2.0 * x + 0.5 * y0))


def test_small_ints_are_range_checked_on_the_shortcut_at_every_width(gpu):
    # Small ints are read in place on the shortcut (CPython's compact ints); each must still be checked
    # against its parameter's width and signedness, and written whole.
    torch = need_torch()
    k = jitbridge.RawKernel(r'''
extern "C" __global__ void widths(unsigned char u8, short i16, unsigned short u16, int i32, unsigned u32,
                                  long long i64, long long* out) {
  out[0] = u8; out[1] = i16; out[2] = u16; out[3] = i32; out[4] = u32; out[5] = i64;
}''', "widths")
    out = torch.empty(6, dtype=torch.int64, device="cuda")
    rng = np.random.default_rng()
    for call in range(4):
        values = [int(rng.integers(0, 256)), int(rng.integers(-2 ** 15, 2 ** 15)), int(rng.integers(0, 2 ** 16)),
                  int(rng.integers(-2 ** 29, 2 ** 29)), int(rng.integers(0, 2 ** 29)), int(rng.integers(-2 ** 29, 2 ** 29))]
        out.fill_(-7)
        k(1, 1, (*values, out))
        assert out.tolist() == values
    assert kinds(k) == [(True, ("integer",) * 6 + ("exchange_array",))]
    ok = [255, -2 ** 15, 2 ** 16 - 1, -2 ** 29, 2 ** 30 - 1, -(2 ** 30 - 1)]
    out.fill_(-7)
    k(1, 1, (*ok, out))
    assert out.tolist() == ok
    for index, bad in [(0, 256), (0, -1), (1, 2 ** 15), (1, -2 ** 15 - 1), (2, -1), (2, 2 ** 16), (4, -5)]:
        args = list(ok)
        args[index] = bad
        out.fill_(-7)
        with pytest.raises(OverflowError, match=f"argument {index}.*does not fit"):
            k(1, 1, (*args, out))
        assert out.tolist() == [-7] * 6  # nothing launched


def test_shortcut_follows_the_current_stream_and_waits_for_explicit_ones(gpu):
    torch = need_torch()
    spin = jitbridge.RawKernel(SPIN_COPY, "spin_copy")
    copy = jitbridge.RawKernel(r'''
extern "C" __global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}''', "copy")
    src = torch.randn(N, device="cuda")
    grid = (N + 255) // 256
    for _ in range(2):   # the 2nd round runs through shortcuts learnt in the 1st
        mid = torch.full((N,), float("nan"), device="cuda")
        out = torch.full((N,), float("nan"), device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):                     # torch's current stream is now s
            spin[grid, 256](mid, src, SPIN_CYCLES, N)
            copy[grid, 256](mid, out, N)               # must queue behind the spin on s
        s.synchronize()
        torch.testing.assert_close(out, src)
        # Explicit stream: the consumer must wait for torch's current stream, where `mid` is written.
        mid2 = torch.full((N,), float("nan"), device="cuda")
        out2 = torch.full((N,), float("nan"), device="cuda")
        other = torch.cuda.Stream()
        spin[grid, 256](mid2, src, SPIN_CYCLES, N)
        copy(grid, 256, (mid2, out2, N), stream=other)
        other.synchronize()
        torch.testing.assert_close(out2, src)
    assert all(usable for usable, _ in kinds(copy))


def test_graph_capture_through_the_shortcut(gpu):
    torch = need_torch()
    k = jitbridge.RawKernel(AXPBY, "axpby")
    n = 10_000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    k[(n + 255) // 256, 256](1.0, x, 1.0, y, n, False, None)   # learnt on the default stream
    assert kinds(k)[0][0]
    y0 = torch.randn(n, device="cuda")
    y.copy_(y0)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):   # a capture stream is current: a launch elsewhere would break the capture
        k[(n + 255) // 256, 256](1.0, x, 1.0, y, n, False, None)
    y.copy_(y0)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, y0 + 3 * x)


def test_cupy_and_numba_arrays_take_their_shortcuts(gpu):
    cp = need_cupy()
    k = jitbridge.RawKernel(AXPBY, "axpby")
    stream = cp.cuda.Stream(non_blocking=True)
    for call in range(3):
        n = 3000 + 101 * call
        x = cp.random.standard_normal(n, dtype=cp.float32)
        y = cp.random.standard_normal(n, dtype=cp.float32)
        expected = 2.0 * x - y
        cp.cuda.Device().synchronize()  # made on the legacy stream, which the non-blocking stream does not wait for
        with stream:   # CuPy's current stream: the launch must follow it
            k((n + 127) // 128, 128, (2.0, x, -1.0, y, n, False, None))
        stream.synchronize()
        cp.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    assert kinds(k) == [(True, ("floating", "cupy_array", "floating", "cupy_array", "integer", "boolean",
                                "null_pointer"))]
    with pytest.raises(TypeError, match="float64"):
        k(1, 128, (2.0, x.astype(cp.float64), -1.0, y, n, False, None))

    cuda = need_numba()
    rng = np.random.default_rng()
    nk = jitbridge.RawKernel(AXPBY, "axpby")
    for call in range(3):
        n = 2048 + 64 * call
        hx, hy = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        x, y = cuda.to_device(hx), cuda.to_device(hy)
        nk((n + 127) // 128, 128, (0.5, x, 1.0, y, n, True, x))
        np.testing.assert_allclose(y.copy_to_host(), -(0.5 * hx + hy + hx), rtol=1e-6, atol=1e-6)
    assert kinds(nk)[0] == (True, ("floating", "numba_array", "floating", "numba_array", "integer", "boolean",
                                   "numba_array"))
    # A Numba array bound to a stream: the shortcut declines, the full path orders the streams.
    s = cuda.stream()
    hx = rng.standard_normal(n, dtype=np.float32)
    hy = rng.standard_normal(n, dtype=np.float32)
    x, y = cuda.to_device(hx, stream=s), cuda.to_device(hy, stream=s)
    nk((n + 127) // 128, 128, (0.5, x, 1.0, y, n, True, x))
    np.testing.assert_allclose(y.copy_to_host(stream=s), -(0.5 * hx + hy + hx), rtol=1e-6, atol=1e-6)


def test_mixed_frameworks_and_jitbridge_tensors_use_the_full_path(gpu):
    torch = need_torch()
    cp = need_cupy()
    k = jitbridge.RawKernel(AXPBY, "axpby")
    n = 5000
    for _ in range(2):
        x = torch.randn(n, device="cuda")
        y = cp.random.standard_normal(n, dtype=cp.float32)
        y0 = y.copy()
        torch.cuda.synchronize()
        k((n + 127) // 128, 128, (1.0, x, 1.0, y, n, False, None))
        cp.cuda.Device().synchronize()
        np.testing.assert_allclose(cp.asnumpy(y), cp.asnumpy(y0) + x.cpu().numpy(), rtol=1e-6, atol=1e-6)
    assert kinds(k)[0][0] is False
    t = jitbridge.empty((n,), "float32")
    k((n + 127) // 128, 128, (0.0, x, 0.0, t, n, False, x))
    jitbridge.synchronize()
    np.testing.assert_allclose(torch.from_dlpack(t).cpu().numpy(), x.cpu().numpy(), rtol=1e-6, atol=1e-6)


def test_a_producer_may_launch_while_it_is_being_read(gpu):
    torch = need_torch()
    k = jitbridge.RawKernel(AXPBY, "axpby")
    n = 4096
    x, y, z = (torch.randn(n, device="cuda") for _ in range(3))
    y0, z0 = y.clone(), z.clone()

    class Lazy:   # its CUDA array interface launches a kernel on the same thread first
        @property
        def __cuda_array_interface__(self):
            k[n // 128, 128](1.0, x, 1.0, z, n, False, None)
            return y.__cuda_array_interface__

    for _ in range(2):
        y.copy_(y0)
        z.copy_(z0)
        k[n // 128, 128](2.0, x, 1.0, Lazy(), n, False, None)
        torch.cuda.synchronize()
        torch.testing.assert_close(z, z0 + x)
        torch.testing.assert_close(y, y0 + 2 * x)


def test_numpy_scalars_and_ints_for_floats_take_the_shortcut(gpu):
    torch = need_torch()
    k = jitbridge.RawKernel(AXPBY, "axpby")
    for call in range(3):
        n = 777 + call
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        expected = -(3 * x - y)
        k((n + 127) // 128, 128, (np.float32(3.0), x, -1, y, np.int32(n), np.bool_(True), None))
        torch.testing.assert_close(y, expected)
    # numpy.float32 and numpy.int32 are read by value (issue 28), in place
    assert kinds(k) == [(True, ("numpy_scalar", "exchange_array", "floating", "exchange_array", "numpy_scalar",
                                "boolean", "null_pointer"))]
    with pytest.raises(OverflowError, match="does not fit"):
        k(1, 128, (np.float32(3.0), x, -1, y, np.int64(2 ** 40), np.bool_(True), None))
    with pytest.raises(OverflowError, match="does not fit"):
        k(1, 128, (np.float32(3.0), x, 2 ** 70, y, np.int32(n), np.bool_(True), None))


def test_two_devices_alternating_through_one_kernel(gpu):
    torch = need_torch()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    k = jitbridge.RawKernel(AXPBY, "axpby")
    n = 3000
    current = torch.cuda.current_device()
    for call in range(6):   # the device changes every call: the shortcut must follow (or decline)
        dev = f"cuda:{call % 2}"
        x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
        expected = 1.5 * x + y
        k[(n + 127) // 128, 128](1.5, x, 1.0, y, n, False, None)
        assert torch.cuda.current_device() == current   # launches never switch the caller's device
        torch.cuda.synchronize(call % 2)
        torch.testing.assert_close(y, expected)
    with pytest.raises(ValueError, match="all arrays must be on one device"):
        k[1, 128](1.5, torch.randn(n, device="cuda:0"), 1.0, torch.randn(n, device="cuda:1"), n, False, None)
    cp = need_cupy()
    with cp.cuda.Device(1):
        x = cp.random.standard_normal(n, dtype=cp.float32)
        y = cp.random.standard_normal(n, dtype=cp.float32)
    for _ in range(2):   # arrays on cuda:1 while cuda:0 is current: CuPy's stream of cuda:1 is the one
        with cp.cuda.Device(1):
            y0 = y.copy()
            cp.cuda.Device(1).synchronize()
        k((n + 127) // 128, 128, (1.5, x, 1.0, y, n, False, None))
        with cp.cuda.Device(1):
            cp.cuda.Device(1).synchronize()
            cp.testing.assert_allclose(y, 1.5 * x + y0, rtol=1e-6, atol=1e-6)


def test_every_device_is_a_fast_device(gpu):
    # Once a kernel has launched on each GPU (the full path resolves it there), launches alternating between
    # arrays of cuda:0 and cuda:1 all take the shortcut (jitbridge_testing counts them) and compute the right thing.
    torch = need_torch()
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, torch sees {torch.cuda.device_count()}")
    k = jitbridge.RawKernel(AXPBY, "axpby")
    n = 5000
    current = torch.cuda.current_device()
    for call in range(12):
        d = call % 2
        x, y = torch.randn(n, device=f"cuda:{d}"), torch.randn(n, device=f"cuda:{d}")
        a = float(np.random.uniform(0.5, 2))
        expected = a * x + y
        before = hooks.shortcut_launches(k)
        k[(n + 127) // 128, 128](a, x, 1.0, y, n, False, None)
        # the first launch on each device takes the full path; every later one the shortcut
        assert hooks.shortcut_launches(k) - before == (0 if call < 2 else 1), f"call {call} on cuda:{d}"
        assert torch.cuda.current_device() == current
        torch.cuda.synchronize(d)
        torch.testing.assert_close(y, expected)
    assert kinds(k) == [(True, ("floating", "exchange_array", "floating", "exchange_array", "integer", "boolean",
                                "null_pointer"))]
    # arrays of two devices in one call still go to the full path, which refuses them
    before = hooks.shortcut_launches(k)
    with pytest.raises(ValueError, match="all arrays must be on one device"):
        k[1, 128](1.5, torch.randn(n, device="cuda:0"), 1.0, torch.randn(n, device="cuda:1"), n, False, None)
    assert hooks.shortcut_launches(k) == before


def test_benchmark_floors_launch_the_addresses_they_read(gpu):
    # bench_launch's floors (jitbridge_testing.prepared): floor() relaunches the packed bytes; floor(*tensors) reads
    # each torch tensor's address through torch's exchange API first (so the kernel sees the tensors of that call).
    torch = need_torch()
    k = jitbridge.RawKernel(AXPBY, "axpby")
    n = 3000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    floor = hooks.prepared(k, (n + 127) // 128, 128, (2.0, x, 1.0, y, n, False, x))
    x2, y2 = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    expected = 2.0 * x2 + y2 + x2
    floor(2.0, x2, 1.0, y2, n, False, x2)
    torch.testing.assert_close(y2, expected)
    expected = 2.0 * x + y + x
    floor()
    torch.testing.assert_close(y, expected)
    with pytest.raises(TypeError, match="type differs"):
        floor(2.0, x.cpu().numpy(), 1.0, y, n, False, x)
    with pytest.raises(TypeError, match="no arguments or the prepared ones"):
        floor(2.0, x)


def test_numba_views_and_new_arrays_are_read_afresh(gpu):
    # The shortcut remembers a Numba array's address per memory object (gpu_data). Views have their own
    # memory object at another address; arrays made after others died may reuse their Python objects'
    # addresses. Every call must still launch on the array it was given.
    cuda = need_numba()
    rng = np.random.default_rng()
    k = jitbridge.RawKernel(AXPBY, "axpby")
    n = 4096
    hx = rng.standard_normal(n + 8, dtype=np.float32)
    x = cuda.to_device(hx)
    for call in range(24):
        start = call % 5
        xv = x[start:start + n]                     # a new view each call, at a moving offset
        hy = rng.standard_normal(n, dtype=np.float32)
        y = cuda.to_device(hy)                      # a new array each call; the last one is freed
        k((n + 127) // 128, 128, (1.5, xv, 1.0, y, n, False, None))
        np.testing.assert_allclose(y.copy_to_host(), 1.5 * hx[start:start + n] + hy, rtol=1e-6, atol=1e-6)
        del xv, y
    assert kinds(k) == [(True, ("floating", "numba_array", "floating", "numba_array", "integer", "boolean",
                                "null_pointer"))]
