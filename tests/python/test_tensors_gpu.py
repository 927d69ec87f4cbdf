"""On a GPU: jitbridge outputs (empty / zeros / empty_like) handed to torch, CuPy, Numba and JAX with the same
pointer, stream-ordered frees that keep queued work valid, DLPack export options, and framework-allocated
outputs (empty_like(torch_tensor) is a torch tensor counted by torch's allocator)."""
import gc

import numpy as np
import pytest
from gpu_frameworks import N, SPIN_COPY, SPIN_CYCLES, need_cupy, need_jax, need_numba, need_torch  # noqa: F401

import jitbridge

pytestmark = pytest.mark.gpu


def need_exchange_api(torch):
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this torch has no DLPack exchange API (__dlpack_c_exchange_api__)")


# ---- jitbridge.Tensor into the frameworks ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "int32", "int8", "uint8", "bool", "float64",
                                  "complex64"])
def test_tensor_to_torch_same_pointer_dtype_shape(name):
    torch = need_torch()
    t = jitbridge.empty((33, 7), name)
    assert t.ptr != 0 and t.nbytes == 33 * 7 * t.itemsize
    y = torch.from_dlpack(t)
    assert y.data_ptr() == t.ptr
    assert tuple(y.shape) == (33, 7) and y.stride() == (7, 1) and y.dtype == getattr(torch, name)
    src = (torch.randn(33, 7, device="cuda") * 30).to(y.dtype)
    y.fill_(1)  # poison
    y.copy_(src)
    torch.cuda.synchronize()
    assert torch.equal(torch.from_dlpack(t), src)  # a second export sees the same memory
    v = jitbridge.as_array(t)
    assert v.ptr == t.ptr and v.dtype == name


def test_zeros_is_zero_after_poisoned_reuse():
    torch = need_torch()
    t = jitbridge.empty(N, "float32")
    torch.from_dlpack(t).fill_(7.0)
    del t
    z = jitbridge.zeros(N, "float32")  # likely the same pool block, dirty
    zt = torch.from_dlpack(z)
    torch.cuda.synchronize()
    assert int(torch.count_nonzero(zt)) == 0


def test_tensor_to_cupy_both_ways():
    cp = need_cupy()
    t = jitbridge.empty((4, 1000), "float32")
    x = cp.from_dlpack(t)
    assert x.data.ptr == t.ptr and x.shape == (4, 1000) and x.dtype == cp.float32
    src = cp.random.standard_normal((4, 1000), dtype=cp.float32)
    x[...] = -1
    x[...] = src
    y = cp.asarray(t)  # through __cuda_array_interface__
    assert y.data.ptr == t.ptr
    assert bool(cp.array_equal(y, src))
    assert jitbridge.as_array(x).ptr == t.ptr


def test_tensor_to_numba():
    cuda = need_numba()
    t = jitbridge.empty((64, 3), "int32")
    d = cuda.as_cuda_array(t)
    assert d.__cuda_array_interface__["data"][0] == t.ptr
    assert d.shape == (64, 3) and d.dtype == np.int32
    host = np.random.default_rng(9).integers(-1000, 1000, (64, 3)).astype(np.int32)
    d.copy_to_device(host)
    cuda.synchronize()
    assert np.array_equal(d.copy_to_host(), host)
    assert jitbridge.as_array(d).ptr == t.ptr


def test_tensor_to_jax():
    jax, jnp = need_jax()
    torch = need_torch()
    t = jitbridge.empty((10, 20), "float32")
    src = torch.randn(10, 20, device="cuda")
    torch.from_dlpack(t).copy_(src)
    torch.cuda.synchronize()
    j = jnp.from_dlpack(t)
    assert j.unsafe_buffer_pointer() == t.ptr
    assert j.shape == (10, 20) and j.dtype == jnp.float32
    assert np.array_equal(np.asarray(j), src.cpu().numpy())


def test_dlpack_export_options():
    torch = need_torch()
    t = jitbridge.empty((256,), "float32")
    src = torch.randn(256, device="cuda")
    torch.from_dlpack(t).copy_(src)
    class CopyOf:  # a producer that asks for a copy
        def __dlpack__(self, **kw):
            kw["copy"] = True
            return t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    c = torch.from_dlpack(CopyOf())
    assert c.data_ptr() != t.ptr
    torch.cuda.synchronize()
    assert torch.equal(c, src)
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0), dl_device=t.__dlpack_device__()))
    with pytest.raises(BufferError, match="dl_device"):     # another CUDA device than the tensor's
        t.__dlpack__(dl_device=(2, t.__dlpack_device__()[1] + 1))
    with pytest.raises(BufferError, match="copy"):          # the host needs a copy (test_host_copy_gpu.py has more)
        t.__dlpack__(dl_device=(1, 0), copy=False)


def test_dlpack_stream_hands_the_tensor_over():
    torch = need_torch()
    s = torch.cuda.Stream()
    t = jitbridge.empty((1024,), "float32")
    assert t.stream == 1
    with torch.cuda.stream(s):
        y = torch.from_dlpack(t)  # torch passes its current stream
    assert t.stream == s.cuda_stream
    assert y.data_ptr() == t.ptr
    t.__dlpack__(stream=-1)  # no sync: the stream stays
    assert t.stream == s.cuda_stream


def test_explicit_allocation_stream_and_device():
    cp = need_cupy()
    a = cp.cuda.Stream(non_blocking=True)
    t = jitbridge.empty((100,), "float64", device=0, stream=a)
    assert t.stream == a.ptr and t.device == "cuda:0"
    assert t.__cuda_array_interface__["stream"] == a.ptr
    u = jitbridge.empty_like(t)
    assert u.stream == a.ptr and u.shape == (100,) and u.dtype == "float64"  # x's own stream
    del t, u  # before `a`: a tensor's allocation stream must outlive it (docs/DESIGN.md)


# ---- stream-ordered frees --------------------------------------------------------------------------------


def test_freed_while_queued_on_its_own_stream_stays_valid():
    cp = need_cupy()
    spin = cp.RawKernel(SPIN_COPY, "spin_copy")
    src = cp.random.standard_normal(N, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    a = cp.cuda.Stream(non_blocking=True)
    with a:
        t = jitbridge.empty(N, "float32", stream=a)
        old = t.ptr
        x = cp.from_dlpack(t)
        x.fill(-1)  # poison, then the real data
        x[...] = src
        r = cp.empty_like(src)
        spin(((N + 255) // 256,), (256,), (r, x, cp.int64(SPIN_CYCLES), cp.int32(N)))  # reads x after ~0.2 s
        del x, t
        gc.collect()  # the buffer is freed now, in stream order on A
        t2 = jitbridge.empty(N, "float32", stream=a)
        reused = t2.ptr == old
        cp.from_dlpack(t2).fill(-7)  # poison whatever memory came back
        assert not a.done, "the long kernel finished too early for the test to mean anything"
    a.synchronize()
    assert bool(cp.array_equal(r, src))
    del t2  # before `a`: a tensor's allocation stream must outlive it (docs/DESIGN.md)
    if not reused:
        pytest.skip("the pool did not hand the freed block back; ordering held but was not stressed")


def test_freed_while_queued_on_another_stream_stays_valid():
    torch = need_torch()
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    src = torch.randn(N, device="cuda")
    torch.cuda.synchronize()
    t = jitbridge.empty(N, "float32", stream=a.cuda_stream)  # allocated on A
    with torch.cuda.stream(b):
        y = torch.from_dlpack(t)  # B waits for A, the tensor is handed to B
        y.fill_(-1)
        y.copy_(src)
        torch.cuda._sleep(5 * SPIN_CYCLES)  # one thread: ~1 s, longer than a full gc.collect() below
        r = y.clone()  # reads the memory on B, ~1 s from now
    assert t.stream == b.cuda_stream
    del y, t
    gc.collect()  # freed: A waits for B (event), then cuMemFreeAsync on A
    t2 = jitbridge.empty(N, "float32", stream=a.cuda_stream)
    with torch.cuda.stream(a):
        torch.from_dlpack(t2).fill_(-7)  # poison on A: must come after B's read
    assert not b.query(), "the long kernel finished too early for the test to mean anything"
    torch.cuda.synchronize()
    assert torch.equal(r, src)


# ---- framework-allocated outputs (DLPack exchange API) -------------------------------------------------------


def test_empty_like_torch_is_a_torch_tensor_from_torchs_allocator():
    torch = need_torch()
    need_exchange_api(torch)
    x = torch.randn(64, 33, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    y = jitbridge.empty_like(x)
    assert isinstance(y, torch.Tensor)
    assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device and y.is_contiguous()
    assert torch.cuda.memory_allocated() - before >= x.numel() * 4
    z = jitbridge.empty_like(x, dtype="bfloat16")
    assert isinstance(z, torch.Tensor) and z.dtype == torch.bfloat16
    y.copy_(x)
    assert torch.equal(y, x)
    del y, z
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


def test_like_torch_zeros_empty_and_cpu():
    torch = need_torch()
    need_exchange_api(torch)
    p = torch.full((5, 7), 3.0, dtype=torch.float16, device="cuda")
    del p  # dirty memory back in torch's cache
    w = jitbridge.zeros((5, 7), "float16", like=torch.Tensor)
    assert isinstance(w, torch.Tensor) and w.dtype == torch.float16 and w.is_cuda
    torch.cuda.synchronize()
    assert int(torch.count_nonzero(w)) == 0
    e = jitbridge.empty((3, 2), torch.int64, like=torch.randn(1, device="cuda"))
    assert isinstance(e, torch.Tensor) and e.dtype == torch.int64 and tuple(e.shape) == (3, 2)
    h = jitbridge.zeros((4,), "float32", device="cpu", like=torch.Tensor)
    assert isinstance(h, torch.Tensor) and h.device.type == "cpu" and torch.equal(h, torch.zeros(4))
