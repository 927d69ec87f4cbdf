"""On a GPU: host round trips (issue 28). jitbridge.asarray uploads NumPy arrays of every dtype (empty and 0-d too,
strided sources too) and numpy.from_dlpack(tensor, device="cpu") copies them back bit for bit; the copy back is
ordered after the kernels queued on the tensor's stream; bfloat16 and fp8 go through torch; refusals are precise."""
import numpy as np
import pytest
from gpu_frameworks import N, SPIN_COPY, SPIN_CYCLES, need_torch

import jitbridge

pytestmark = pytest.mark.gpu

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
          "float64", "complex64", "complex128"]
SHAPES = [(), (0,), (1,), (1000,), (33, 65), (2, 0, 3), (4, 5, 6, 7)]


def random_array(rng, dtype, shape):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("complex"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.startswith("float"):
        return (rng.standard_normal(shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_shape_round_trips(gpu, dtype):
    rng = np.random.default_rng()
    for shape in SHAPES:
        a = random_array(rng, dtype, shape)
        t = jitbridge.asarray(a)
        assert (t.dtype, t.shape, t.device) == (dtype, shape, "cuda:0")
        back = np.from_dlpack(t, device="cpu")
        assert back.dtype == a.dtype and back.shape == a.shape
        assert back.tobytes() == a.tobytes(), (dtype, shape)   # bit for bit (NaNs included)
        again = np.from_dlpack(t, device="cpu", copy=True)
        assert again.tobytes() == a.tobytes() and (again.size == 0 or again.ctypes.data != back.ctypes.data)


def test_strided_sources_and_kernels_in_between(gpu):
    rng = np.random.default_rng()
    a = rng.standard_normal((300, 200)).astype(np.float32)
    src = a[::-3, 1::2]
    t = jitbridge.asarray(src)
    assert np.array_equal(np.from_dlpack(t, device="cpu"), src)
    k = jitbridge.RawKernel(r'''extern "C" __global__ void scale(float* x, float s, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) x[i] *= s; }''', "scale")
    k((src.size + 255) // 256, 256, (t, np.float32(3.0), np.int32(src.size)))
    assert np.array_equal(np.from_dlpack(t, device="cpu"), src * np.float32(3.0))


def test_the_copy_back_waits_for_the_tensors_stream(gpu):
    torch = need_torch()
    spin = jitbridge.RawKernel(SPIN_COPY, "spin_copy")
    src = torch.arange(N, device="cuda", dtype=torch.float32)
    out = jitbridge.asarray(np.full(N, -1.0, np.float32))   # poison
    s = torch.cuda.Stream()
    spin((N + 255) // 256, 256, (out, src, SPIN_CYCLES, N), stream=s.cuda_stream)   # out is handed to s
    assert out.stream == s.cuda_stream
    back = np.from_dlpack(out, device="cpu")   # no synchronize: the copy is ordered on out's stream
    assert np.array_equal(back, np.arange(N, dtype=np.float32))


def test_bfloat16_and_fp8_through_torch(gpu):
    torch = need_torch()
    tried = []
    for dtype in (torch.bfloat16, getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
        if dtype is None:
            continue
        x = torch.randn(1000).to(dtype)   # on the host
        try:
            torch.utils.dlpack.to_dlpack(x)
        except (RuntimeError, TypeError, BufferError):
            continue   # this torch exports no such dtype through DLPack
        t = jitbridge.asarray(x)
        assert t.dtype == str(dtype).replace("torch.", "")
        back = torch.from_dlpack(t.__dlpack__(dl_device=(1, 0)))   # a legacy capsule of the host copy
        assert back.device.type == "cpu" and back.dtype == dtype
        assert torch.equal(back.view(torch.uint8), x.view(torch.uint8))
        tried.append(dtype)
    assert torch.bfloat16 in tried


def test_refusals(gpu):
    t = jitbridge.asarray(np.arange(10, dtype=np.float32))
    with pytest.raises(BufferError, match="copy=False"):
        np.from_dlpack(t, device="cpu", copy=False)
    with pytest.raises(BufferError, match=r"dl_device=\(2, 99\) was asked for"):
        t.__dlpack__(dl_device=(2, 99))
    with pytest.raises(ValueError, match="already"):
        jitbridge.asarray(jitbridge.as_array(t))
