"""The C interface capsule `_core._c_api` (launch/include/jitbridge/c_api.h) seen from Python through ctypes: its
version fields, and the calls that need no GPU (a RawKernel's handle, its signature, errors). The launches are
tested without an interpreter in tests/c_api (ctest c_api, on the fake driver)."""
import ctypes

import pytest

import jitbridge
from c_api_ctypes import (ERROR_TYPE, ERROR_VALUE, MAJOR, MINOR, PARAM_POINTER, PARAM_SCALAR, PARAM_TENSOR, P, Param,
                          Table, message, table)
from jitbridge import _core


def test_capsule_version_fields():
    assert type(_core._c_api).__name__ == "PyCapsule"
    t = table()
    assert (t.major, t.minor) == (MAJOR, MINOR)
    assert t.struct_size == ctypes.sizeof(Table)
    assert t.jitbridge_version.decode() == jitbridge.__version__


def test_kernel_from_python_reads_the_signature():
    k = jitbridge.RawKernel(r"""
#include <cuda_fp16.h>
#include <jitbridge/tensor.cuh>
extern "C" __global__ void f(const __half* x, float4* v, jitbridge::Tensor<double, 3> t, unsigned short n) {}
""", "f")
    t = table()
    handle = P()
    assert t.kernel_from_python(k, ctypes.byref(handle)) == 0
    try:
        name, count = ctypes.c_char_p(), ctypes.c_int64()
        assert t.kernel_info(handle, ctypes.byref(name), ctypes.byref(count)) == 0
        assert (name.value, count.value) == (b"f", 4)
        got = []
        for i in range(4):
            p = Param(struct_size=ctypes.sizeof(Param))
            assert t.kernel_param(handle, i, ctypes.byref(p)) == 0, message(t)
            got.append((p.kind, p.has_dtype, p.dtype_code, p.dtype_bits, p.lanes, p.rank, p.is_const))
        assert got == [(PARAM_POINTER, 1, 2, 16, 1, 0, 1),   # const __half*: float16
                       (PARAM_POINTER, 1, 2, 32, 4, 0, 0),   # float4*: 4 lanes of float32
                       (PARAM_TENSOR, 1, 2, 64, 1, 3, 0),    # Tensor<double, 3>
                       (PARAM_SCALAR, 1, 1, 16, 1, 0, 0)]    # unsigned short: uint16
        p = Param(struct_size=ctypes.sizeof(Param))
        assert t.kernel_param(handle, 4, ctypes.byref(p)) == ERROR_VALUE
        assert "index 4 is out of range" in message(t)
    finally:
        t.kernel_release(handle)


@pytest.mark.parametrize("obj", [None, 3, "kernel"])
def test_kernel_from_python_refuses_other_objects(obj):
    t = table()
    handle = P()
    assert t.kernel_from_python(obj, ctypes.byref(handle)) == ERROR_TYPE
    assert handle.value is None
    assert "not a jitbridge.RawKernel" in message(t)
