"""The C interface capsule `_core._c_api` (launch/include/jitbridge/c_api.h) seen from Python through ctypes: its
version fields, and the calls that need no GPU (a RawKernel's handle, its signature, errors). The launches are
tested without an interpreter in tests/c_api (ctest c_api, on the fake driver)."""
import ctypes

import pytest

import jitbridge
from jitbridge import _core

C_API_MAJOR, C_API_MINOR = 1, 0  # c_api.h's JITBRIDGE_C_API_MAJOR / _MINOR

ERROR_TYPE, ERROR_VALUE = 1, 3
PARAM_POINTER, PARAM_TENSOR, PARAM_SCALAR = 0, 1, 2


class Param(ctypes.Structure):  # jitbridge_param
    _fields_ = [("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32), ("has_dtype", ctypes.c_int32),
                ("dtype_code", ctypes.c_uint8), ("dtype_bits", ctypes.c_uint8), ("dtype_lanes", ctypes.c_uint16),
                ("lanes", ctypes.c_int32), ("rank", ctypes.c_int32), ("is_const", ctypes.c_int32),
                ("size", ctypes.c_size_t), ("align", ctypes.c_size_t), ("type", ctypes.c_char_p),
                ("spelling", ctypes.c_char_p)]


P = ctypes.c_void_p
# Every call but kernel_from_python runs without the GIL (CFUNCTYPE releases it); kernel_from_python needs it.
_fn = ctypes.CFUNCTYPE
FIELDS = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("struct_size", ctypes.c_uint32),
          ("reserved", ctypes.c_uint32), ("jitbridge_version", ctypes.c_char_p),
          ("last_error", _fn(ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int))),
          ("kernel_from_source", _fn(ctypes.c_int, P, ctypes.c_char_p, ctypes.POINTER(P))),
          ("kernel_from_python", ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(P))),
          ("kernel_retain", _fn(None, P)),
          ("kernel_release", _fn(None, P)),
          ("kernel_info", _fn(ctypes.c_int, P, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int64))),
          ("kernel_param", _fn(ctypes.c_int, P, ctypes.c_size_t, ctypes.POINTER(Param))),
          ("kernel_resolve", P), ("launch", P), ("mem_alloc", P), ("mem_free", P)]


class Table(ctypes.Structure):  # JitbridgeCApi, version 1.0
    _fields_ = FIELDS


def table():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return Table.from_address(get(_core._c_api, b"jitbridge._core._c_api"))


def message(t):
    text = ctypes.c_char_p()
    t.last_error(ctypes.byref(text), None)
    return text.value.decode()


def test_capsule_version_fields():
    assert type(_core._c_api).__name__ == "PyCapsule"
    t = table()
    assert (t.major, t.minor) == (C_API_MAJOR, C_API_MINOR)
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
