"""On a GPU: jitbridge's own Tensors from the allocators of jitbridge.allocators (issue 28). CuPy's pool counters,
torch.cuda.memory_allocated() and RMM's statistics move by the tensor's size while it lives and come back when it
goes; a kernel writes into the memory correctly (fresh random inputs, poisoned outputs, compared with NumPy); CuPy
and torch share one pool through pytorch-pfn-extras where it is installed; the C interface's alloc_async takes the
process-wide allocator from a thread without the GIL. RMM and pytorch-pfn-extras skip with the reason when missing."""
import ctypes
import gc

import numpy as np
import pytest
from gpu_frameworks import need_cupy, need_torch
from test_framework_outputs_gpu import SCALE

import jitbridge
from jitbridge.allocators import CupyAllocator, RmmAllocator, TorchAllocator

pytestmark = pytest.mark.gpu

N = 1 << 20


def handle(stream):
    """A CuPy or torch stream's int handle (None stays None: the legacy default stream)."""
    if stream is None or isinstance(stream, int):
        return stream
    return stream.ptr if hasattr(stream, "ptr") else stream.cuda_stream


def scale_into(y, x_host, stream):
    """Uploads x_host, poisons y (a jitbridge.Tensor of N float32), runs scale on `stream`, checks y == 2.5 * x."""
    stream = handle(stream)
    x = jitbridge.asarray(x_host, stream=stream)
    jitbridge.RawKernel(r'''extern "C" __global__ void poison(float* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = __int_as_float(0x7fc00000); }''', "poison")(
        (N + 255) // 256, 256, (y, N), stream=stream)
    jitbridge.RawKernel(SCALE, "scale")((N + 255) // 256, 256, (x, y, np.float32(2.5), N), stream=stream)
    assert np.array_equal(np.from_dlpack(y, device="cpu"), x_host * np.float32(2.5))


def fresh():
    return np.random.default_rng().standard_normal(N, dtype=np.float32)


def test_cupy_allocator_takes_the_memory_from_cupys_pool(gpu):
    cp = need_cupy()
    pool = cp.get_default_memory_pool()
    gc.collect()
    before = pool.used_bytes()
    y = jitbridge.empty(N, "float32", allocator=CupyAllocator())
    assert pool.used_bytes() - before >= 4 * N
    scale_into(y, fresh(), stream=None)
    del y
    assert pool.used_bytes() == before            # back in CuPy's pool (deallocate ran with the GIL, here)
    s = cp.cuda.Stream(non_blocking=True)
    with jitbridge.using_allocator(CupyAllocator()):   # a scope, on CuPy's non-default stream
        y = jitbridge.empty(N, "float32", stream=s.ptr)
        assert pool.used_bytes() - before >= 4 * N
        scale_into(y, fresh(), stream=s)
    del y
    s.synchronize()
    assert pool.used_bytes() == before


def test_cupy_allocator_honours_cupy_set_allocator(gpu):
    cp = need_cupy()
    seen, pool = [], cp.cuda.MemoryPool()

    def allocate(size):
        seen.append(size)
        return pool.malloc(size)

    cp.cuda.set_allocator(allocate)
    try:
        previous = jitbridge.set_allocator(CupyAllocator())    # process-wide
        y = jitbridge.zeros(12345, "float64")
        assert seen and seen[-1] >= 12345 * 8 and pool.used_bytes() >= 12345 * 8
        assert not np.from_dlpack(y, device="cpu").any()
        del y
        assert pool.used_bytes() == 0
    finally:
        jitbridge.set_allocator(previous)
        cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)


def test_torch_allocator_takes_the_memory_from_torchs_caching_allocator(gpu):
    torch = need_torch()
    gc.collect()
    before = torch.cuda.memory_allocated()
    s = torch.cuda.Stream()
    y = jitbridge.empty(N, "float32", stream=s.cuda_stream, allocator=TorchAllocator())
    assert torch.cuda.memory_allocated() - before >= 4 * N
    scale_into(y, fresh(), stream=s)
    t = torch.from_dlpack(y)   # shares the memory; jitbridge frees it when both let go
    del y
    assert torch.cuda.memory_allocated() - before >= 4 * N
    del t
    s.synchronize()
    assert torch.cuda.memory_allocated() == before


def rmm_count(stats, key):
    """One of a StatisticsResourceAdaptor's counters: a property returning a Statistics object in RMM 26, a dict
    in older ones."""
    counts = stats.allocation_counts
    counts = counts() if callable(counts) else counts
    return counts[key] if isinstance(counts, dict) else getattr(counts, key)


def test_rmm_allocator_uses_the_current_device_resource(gpu):
    rmm = pytest.importorskip("rmm", reason="RMM (pip install rmm-cu13) is not installed")
    mr = pytest.importorskip("rmm.mr")
    previous_mr = mr.get_current_device_resource()
    stats = mr.StatisticsResourceAdaptor(mr.CudaMemoryResource())
    mr.set_current_device_resource(stats)
    try:
        y = jitbridge.empty(N, "float32", allocator=RmmAllocator())
        assert rmm_count(stats, "current_bytes") >= 4 * N and rmm_count(stats, "current_count") == 1
        scale_into(y, fresh(), stream=None)
        del y
        assert rmm_count(stats, "current_bytes") == 0
        explicit = mr.StatisticsResourceAdaptor(mr.CudaMemoryResource())
        y = jitbridge.empty(100, "float32", allocator=RmmAllocator(mr=explicit))
        assert rmm_count(explicit, "current_count") == 1 and rmm_count(stats, "current_count") == 0
        del y
        assert rmm_count(explicit, "current_count") == 0
    finally:
        mr.set_current_device_resource(previous_mr)
    assert rmm is not None


def test_cupy_and_torch_share_one_pool_through_pytorch_pfn_extras(gpu):
    torch = need_torch()
    need_cupy()
    ppe = pytest.importorskip("pytorch_pfn_extras", reason="pytorch-pfn-extras is not installed")
    ppe.cuda.use_torch_mempool_in_cupy()
    try:
        gc.collect()
        before = torch.cuda.memory_allocated()
        y = jitbridge.empty(N, "float32", allocator=CupyAllocator())   # CuPy's allocator, torch's pool
        assert torch.cuda.memory_allocated() - before >= 4 * N
        scale_into(y, fresh(), stream=None)
        del y
        assert torch.cuda.memory_allocated() == before
    finally:
        ppe.cuda.use_default_mempool_in_cupy()


def test_c_interface_alloc_async_takes_the_process_wide_allocator_without_the_gil(gpu):
    torch = need_torch()
    from c_api_ctypes import message, table
    t = table()
    previous = jitbridge.set_allocator(TorchAllocator())
    try:
        gc.collect()
        before = torch.cuda.memory_allocated()
        p = ctypes.c_uint64()
        assert t.alloc_async(0, 1 << 20, None, ctypes.byref(p)) == 0, message(t)   # ctypes releases the GIL
        assert p.value and torch.cuda.memory_allocated() - before >= 1 << 20
        assert t.free_async(0, p.value, None) == 0, message(t)
        for _ in range(10_000):   # the deallocate queued for this thread runs between bytecodes
            if torch.cuda.memory_allocated() == before:
                break
        assert torch.cuda.memory_allocated() == before
    finally:
        jitbridge.set_allocator(previous)
