"""The C interface (launch/include/jitbridge/c_api.h) on the GPU, called through ctypes as a native add-on calls it:
kernels from source and from a RawKernel, resolved, launched with torch tensors described as raw pointers on torch's
current stream from a thread that does not hold the GIL (ctypes releases it), stream-ordered allocations, and bad
arguments refused before the driver. Inputs are fresh random data, outputs poisoned before each launch and compared
with references."""
import ctypes
import threading

import pytest

import jitbridge
from c_api_ctypes import (ARG_ARRAY, ARG_INT, ERROR_LAUNCH_CONFIG, ERROR_TYPE, NO_ARG_CHECKS, OK, Arg, Args, Array,
                          P, Source, config, message, table)
from gpu_frameworks import need_torch

pytestmark = pytest.mark.gpu

SRC = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void fill(float* p, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v + i;
}
extern "C" __global__ void copy(const float* src, float* dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}
'''


# One pointer of each form the C launch's fast path reads differently (launch/src/c_api.cpp, pack_fast): const
# float*, double*, void* and char* (take_plain_array), float* (a slot when strided).
FORMS = r'''
extern "C" __global__ void forms(const float* x, double* y, void* v, const char* c, float* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = 2.0 * x[i];
    static_cast<float*>(v)[i] = x[i] + 1.0f;
    z[i] = x[i] * static_cast<float>(c[i]);
  }
}
'''


def kernel_from_source(t, name, source=SRC):
    src = Source(struct_size=ctypes.sizeof(Source), source=source.encode())
    k = P()
    assert t.kernel_from_source(ctypes.byref(src), name.encode(), ctypes.byref(k)) == OK, message(t)
    return k


def resolve(t, k, device=0):
    f = P()
    assert t.kernel_resolve(k, device, ctypes.byref(f)) == OK, message(t)
    return f


def in_thread(fn):
    """fn() on another thread (ctypes calls there release the GIL); returns its result, re-raising its error."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 (handed to the caller)
            out["error"] = e

    th = threading.Thread(target=run)
    th.start()
    th.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.parametrize("origin", ["source", "raw_kernel"])
def test_saxpy_through_the_c_interface_on_torchs_stream(origin):
    torch = need_torch()
    t = table()
    if origin == "source":
        k = kernel_from_source(t, "saxpy")
    else:
        raw = jitbridge.RawKernel(SRC, "saxpy")
        k = P()
        assert t.kernel_from_python(raw, ctypes.byref(k)) == OK, message(t)
    try:
        f = resolve(t, k)
        n = 100_003
        x = torch.randn(n, device="cuda")
        y0 = torch.randn(n, device="cuda")
        y = y0.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        args = Args(1.75, (x.data_ptr(), n, True), (y.data_ptr(), n, False), n)
        c = config((n + 255) // 256, 256, stream=stream.cuda_stream)
        rc = in_thread(lambda: t.launch(f, ctypes.byref(c), args.array, 4, 0))
        assert rc == OK, message(t)
        stream.synchronize()
        torch.testing.assert_close(y, 1.75 * x + y0)
    finally:
        t.kernel_release(k)


def test_stream_ordered_allocation_written_by_a_kernel_and_read_back():
    torch = need_torch()
    t = table()
    fill_k, copy_k = kernel_from_source(t, "fill"), kernel_from_source(t, "copy")
    try:
        fill, copy = resolve(t, fill_k), resolve(t, copy_k)
        stream = torch.cuda.current_stream().cuda_stream
        n = 4099
        ptr = ctypes.c_uint64()
        assert t.mem_alloc(0, 4 * n, stream, ctypes.byref(ptr)) == OK, message(t)
        assert ptr.value != 0
        out = torch.full((n,), float("nan"), device="cuda")
        c = config((n + 127) // 128, 128, stream=stream)
        assert t.launch(fill, ctypes.byref(c), Args((ptr.value, n, False), 0.5, n).array, 3, 0) == OK, message(t)
        assert t.launch(copy, ctypes.byref(c), Args((ptr.value, n, True), (out.data_ptr(), n, False), n).array,
                        3, 0) == OK, message(t)
        assert t.mem_free(0, ptr.value, stream) == OK, message(t)
        torch.testing.assert_close(out, torch.arange(n, device="cuda", dtype=torch.float32) + 0.5)
    finally:
        t.kernel_release(fill_k)
        t.kernel_release(copy_k)


def test_bad_arguments_and_configurations_never_reach_the_gpu():
    torch = need_torch()
    t = table()
    k = kernel_from_source(t, "saxpy")
    try:
        f = resolve(t, k)
        n = 1024
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        before = y.clone()
        c = config(4, 256, stream=torch.cuda.current_stream().cuda_stream)
        wrong = Args(1.0, (x.data_ptr(), n, True), n, n)  # an int where y goes
        assert t.launch(f, ctypes.byref(c), wrong.array, 4, 0) == ERROR_TYPE
        assert "saxpy: argument 2 (float*)" in message(t)
        assert t.launch(f, ctypes.byref(c), wrong.array, 4, NO_ARG_CHECKS) == ERROR_TYPE  # scalars keep their rules
        big = config(1, 4096, stream=torch.cuda.current_stream().cuda_stream)
        good = Args(1.0, (x.data_ptr(), n, True), (y.data_ptr(), n, False), n)
        assert t.launch(f, ctypes.byref(big), good.array, 4, 0) == ERROR_LAUNCH_CONFIG
        assert "block" in message(t)
        torch.cuda.synchronize()
        assert torch.equal(y, before)
    finally:
        t.kernel_release(k)


@pytest.mark.parametrize("flags", [0, NO_ARG_CHECKS])
@pytest.mark.parametrize("z_form", ["1-d", "2-d", "strided"])
def test_every_array_form_of_the_c_launch_fast_path(flags, z_form):
    """Arrays into const float*, double*, void*, char* and float* (1-d, 2-d, or with explicit contiguous strides: the
    slot path), checked and unchecked: the kernel reads and writes each as described."""
    torch = need_torch()
    t = table()
    k = kernel_from_source(t, "forms", FORMS)
    try:
        f = resolve(t, k)
        rows, cols = 97, 129
        n = rows * cols
        x = torch.randn(n, device="cuda")
        c8 = torch.randint(-100, 100, (n,), device="cuda", dtype=torch.int8)
        y = torch.full((n,), float("nan"), device="cuda", dtype=torch.float64)
        v = torch.full((n,), float("nan"), device="cuda")
        z = torch.full((n,), float("nan"), device="cuda")
        keep = []

        def array(tensor, code, bits, shape, readonly, strides=None):
            a = Arg(kind=ARG_ARRAY)
            extents = (ctypes.c_int64 * len(shape))(*shape)
            keep.append(extents)
            a.array = Array(data=tensor.data_ptr(), device_type=2, device_id=0, dtype_code=code, dtype_bits=bits,
                            dtype_lanes=1, ndim=len(shape), readonly=int(readonly),
                            shape=ctypes.cast(extents, ctypes.POINTER(ctypes.c_int64)))
            if strides is not None:
                steps = (ctypes.c_int64 * len(strides))(*strides)
                keep.append(steps)
                a.array.strides = ctypes.cast(steps, ctypes.POINTER(ctypes.c_int64))
            return a

        z_arg = {"1-d": lambda: array(z, 2, 32, (n,), False), "2-d": lambda: array(z, 2, 32, (rows, cols), False),
                 "strided": lambda: array(z, 2, 32, (rows, cols), False, strides=(cols, 1))}[z_form]()
        args = (Arg * 6)(array(x, 2, 32, (n,), True), array(y, 2, 64, (n,), False), array(v, 2, 32, (n,), False),
                         array(c8, 0, 8, (n,), True), z_arg, Arg(kind=ARG_INT, i=n))
        c = config((n + 255) // 256, 256, stream=torch.cuda.current_stream().cuda_stream)
        assert t.launch(f, ctypes.byref(c), args, 6, flags) == OK, message(t)
        torch.cuda.synchronize()
        torch.testing.assert_close(y, 2.0 * x.double())
        torch.testing.assert_close(v, x + 1.0)
        torch.testing.assert_close(z, x * c8.float())
    finally:
        t.kernel_release(k)
