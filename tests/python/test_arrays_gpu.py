"""On a GPU: jitbridge.as_array over torch, CuPy, Numba and JAX arrays (same pointer, dtype, shape and strides), the
consumer-stream rule, and the stream handshake (a consumer on stream B reads what a long kernel wrote on stream A,
with no host synchronisation in between). Each framework is imported inside its test and skipped if missing."""

import numpy as np
import pytest
from gpu_frameworks import N, SPIN_COPY, SPIN_CYCLES, need_cupy, need_jax, need_numba, need_torch  # noqa: F401

import jitbridge
from testing_hooks import hooks

pytestmark = pytest.mark.gpu


# ---- torch ---------------------------------------------------------------------------------------------


TORCH_DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool",
                "complex64", "complex128"]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_round_trip_pointer_dtype_shape(name):
    torch = need_torch()
    dtype = getattr(torch, name)
    x = (torch.randn(7, 9, device="cuda") * 50).to(dtype)
    v = jitbridge.as_array(x)
    assert v.ptr == x.data_ptr()
    assert v.shape == (7, 9) and v.strides == x.stride() and v.dtype == name
    assert v.device == f"cuda:{x.device.index}"
    expected = "exchange_api" if hasattr(torch.Tensor, "__dlpack_c_exchange_api__") else "dlpack"
    assert hooks.adapter_protocol(torch.Tensor) == expected


def test_torch_noncontiguous_zero_size_zero_dim():
    torch = need_torch()
    x = torch.randn(6, 10, device="cuda")
    for y in (x.t(), x[1::2, ::3], x[:, 4], x[2:2]):
        v = jitbridge.as_array(y)
        assert v.shape == tuple(y.shape)
        if y.numel():
            assert v.ptr == y.data_ptr() and v.strides == y.stride()
    s = torch.tensor(3.5, device="cuda")
    v = jitbridge.as_array(s)
    assert v.shape == () and v.ptr == s.data_ptr()


def test_torch_fp8_where_exported():
    torch = need_torch()
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    x = torch.randn(16, device="cuda").to(torch.float8_e4m3fn)
    try:
        v = jitbridge.as_array(x)
    except (BufferError, RuntimeError, TypeError) as e:
        pytest.skip(f"torch does not export float8 through DLPack: {e}")
    assert v.dtype == "float8_e4m3fn" and v.ptr == x.data_ptr() and v.itemsize == 1


def test_torch_consumer_stream_is_torchs_current_stream():
    torch = need_torch()
    x = torch.randn(100, device="cuda")
    assert jitbridge.as_array(x).stream == 1  # torch's default stream is the legacy one
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        assert jitbridge.as_array(x).stream == s.cuda_stream
    assert jitbridge.as_array(x, stream=s).stream == s.cuda_stream  # explicit wins
    assert jitbridge.as_array(x, stream=s.cuda_stream).stream == s.cuda_stream


def test_torch_view_is_cheap_on_the_exchange_path():
    torch = need_torch()
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this torch has no DLPack exchange API")
    x = torch.randn(32, 32, device="cuda")
    ns = min(hooks.bench_view(x, 20000) for _ in range(5))
    assert ns < 1000, f"{ns:.0f} ns per view on the exchange-API path"  # goal 100 ns; the bench reports it


def test_torch_handshake_long_kernel_on_a_consumer_on_b():
    torch = need_torch()
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    src = torch.randn(N, device="cuda")
    x = torch.full((N,), -1.0, device="cuda")  # poison
    torch.cuda.synchronize()
    with torch.cuda.stream(a):
        torch.cuda._sleep(SPIN_CYCLES)
        x.copy_(src)  # written on A, after the long kernel
        v = jitbridge.as_array(x, stream=b)  # consumer B waits for torch's current stream (A)
    assert v.ptr == x.data_ptr() and v.stream == b.cuda_stream
    assert not a.query(), "the long kernel finished too early for the test to mean anything"
    with torch.cuda.stream(b):
        y = x.clone()  # read on B
    b.synchronize()  # only B: A is never waited for on the host
    assert torch.equal(y, src)


# ---- CuPy ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int32", "uint64", "bool", "complex64"])
def test_cupy_round_trip(dtype):
    cp = need_cupy()
    x = (cp.random.standard_normal((5, 11)) * 20).astype(dtype)[:, ::-2]  # negative strides too
    # CuPy 14.2's __dlpack__ mis-exports negative strides, so CuPy arrays are read as CAI would give them: from
    # their attributes, which agreed with CuPy's own CAI at the type's first array (else it would be demoted).
    v = jitbridge.as_array(x)
    assert hooks.adapter_protocol(type(x)) == "cupy_fields"
    assert v.ptr == x.data.ptr
    assert v.shape == x.shape and v.strides == tuple(s // x.itemsize for s in x.strides)
    assert v.dtype == dtype and v.device == f"cuda:{x.device.id}"


def test_cupy_consumer_stream_is_cupys_current_stream():
    cp = need_cupy()
    x = cp.random.standard_normal(1000, dtype=cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        assert jitbridge.as_array(x).stream == s.ptr
    assert jitbridge.as_array(x).stream in (1, cp.cuda.get_current_stream().ptr or 1)


def test_cai_handshake_long_kernel_on_a_consumer_on_b():
    cp = need_cupy()
    spin = cp.RawKernel(SPIN_COPY, "spin_copy")
    src = cp.random.standard_normal(N, dtype=cp.float32)
    x = cp.full(N, -1.0, dtype=cp.float32)  # poison
    cp.cuda.Device().synchronize()
    a = cp.cuda.Stream(non_blocking=True)
    b = cp.cuda.Stream(non_blocking=True)
    with a:
        spin(((N + 255) // 256,), (256,), (x, src, cp.int64(SPIN_CYCLES), cp.int32(N)))

    class OnA:  # x as a CAI v3 producer whose data is ready on stream A
        __cuda_array_interface__ = dict(x.__cuda_array_interface__, stream=a.ptr, version=3)

    v = jitbridge.as_array(OnA(), stream=b)  # B waits for A through an event
    assert v.ptr == x.data.ptr and v.stream == b.ptr
    assert not a.done, "the long kernel finished too early for the test to mean anything"
    with b:
        y = x.copy()  # read on B
    b.synchronize()  # only B
    assert bool(cp.array_equal(y, src))


# ---- Numba ---------------------------------------------------------------------------------------------


def test_numba_round_trip_through_cai():
    cuda = need_numba()
    host = np.random.default_rng(5).standard_normal((8, 6)).astype(np.float32)
    d = cuda.to_device(host)
    v = jitbridge.as_array(d)
    assert hooks.adapter_protocol(type(d)) == "numba_fields"  # agreed with Numba's own CAI
    assert v.ptr == d.__cuda_array_interface__["data"][0]
    assert v.shape == (8, 6) and v.strides == (6, 1) and v.dtype == "float32"
    w = jitbridge.as_array(d[:, ::2])
    assert w.strides == (6, 2) and w.shape == (8, 3)


# ---- JAX -----------------------------------------------------------------------------------------------


def test_jax_round_trip():
    jax, jnp = need_jax()
    x = jax.random.normal(jax.random.PRNGKey(3), (12, 5), dtype=jnp.float32)
    x.block_until_ready()
    v = jitbridge.as_array(x)
    assert v.ptr == x.unsafe_buffer_pointer()
    assert v.shape == (12, 5) and v.strides == (5, 1) and v.dtype == "float32"
    assert v.device.startswith("cuda:")
