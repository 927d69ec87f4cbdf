"""The CuPy / Numba fast readers (framework_arrays.cpp) against stand-ins with the same module, name and
attributes: the fields match what the type's __cuda_array_interface__ says, are read afresh per call, and a
type whose attributes disagree with its CAI is demoted to the CAI path at its first array."""

import numpy as np
import pytest

import jitbridge
from gpu_frameworks import MADE_UP_ADDRESSES
from testing_hooks import hooks

pytestmark = MADE_UP_ADDRESSES


class _Memory:
    def __init__(self, ptr, device_id=0):
        self.ptr, self.device_id = ptr, device_id


def cupy_like(cai_override=None):
    """A fresh class named cupy.ndarray (module 'cupy', name 'ndarray') with CuPy's attributes."""
    class ndarray:  # noqa: N801 (CuPy's own spelling)
        def __init__(self, ptr, shape, dtype="float32", strides=None):
            self.dtype = np.dtype(dtype)
            self.shape = tuple(shape)
            if strides is None:
                strides, step = [], self.dtype.itemsize
                for n in reversed(self.shape):
                    strides.insert(0, step)
                    step *= n
            self.strides = tuple(strides)
            self.data = _Memory(ptr)

        @property
        def __cuda_array_interface__(self):
            d = {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str,
                 "data": (self.data.ptr, False), "version": 3}
            d.update(cai_override or {})
            return d

    ndarray.__module__, ndarray.__qualname__ = "cupy", "ndarray"
    return ndarray


def numba_like():
    class Pointer:
        def __init__(self, value):
            self.value = value

    class DeviceNDArray:
        def __init__(self, ptr, shape, dtype="float64", strides=None):
            self.dtype = np.dtype(dtype)
            self.shape = tuple(shape)
            self.strides = tuple(strides) if strides is not None else tuple(
                int(s) for s in np.empty(self.shape, self.dtype).strides)
            self.gpu_data = Pointer(ptr)
            self.stream = 0

        @property
        def device_ctypes_pointer(self):
            return self.gpu_data

        @property
        def __cuda_array_interface__(self):
            return {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str,
                    "data": (self.gpu_data.value or 0, False), "version": 3, "stream": None}

    DeviceNDArray.__module__ = "numba.cuda.cudadrv.devicearray"
    DeviceNDArray.__qualname__ = "DeviceNDArray"
    return DeviceNDArray


def test_cupy_fields_are_read_from_attributes():
    cls = cupy_like()
    assert hooks.adapter_protocol(cls) == "cupy_fields"
    a = cls(0x7000, (3, 4), "float16")
    v = jitbridge.as_array(a, stream=1)
    assert (v.ptr, v.shape, v.strides, v.dtype, v.device, v.readonly) == (0x7000, (3, 4), (4, 1), "float16",
                                                                            "cuda:0", False)
    # Read afresh each call: CuPy's in-place `a.shape = ...` is seen.
    a.shape, a.strides = (12,), (2,)
    v = jitbridge.as_array(a, stream=1)
    assert v.shape == (12,) and v.strides == (1,)
    assert hooks.adapter_protocol(cls) == "cupy_fields"


def test_cupy_fields_negative_strides_and_empty():
    cls = cupy_like()
    v = jitbridge.as_array(cls(0x7010, (5,), "float32", strides=(-4,)), stream=1)
    assert v.strides == (-1,) and v.ptr == 0x7010
    v = jitbridge.as_array(cls(0, (0, 3)), stream=1)
    assert v.shape == (0, 3) and v.ptr == 0


def test_cupy_fields_bad_fields_name_the_argument():
    cls = cupy_like()
    jitbridge.as_array(cls(0x7000, (2,)), stream=1)  # verified against the CAI
    with pytest.raises(ValueError, match=r"as_array\(obj\).*not empty"):
        jitbridge.as_array(cls(0, (2,)), stream=1)
    with pytest.raises(ValueError, match=r"as_array\(obj\).*not a multiple of the item size"):
        jitbridge.as_array(cls(0x7000, (2,), "float32", strides=(3,)), stream=1)
    big_endian = cls(0x7000, (2,))
    big_endian.dtype = np.dtype(">f4")
    with pytest.raises(ValueError, match=r"as_array\(obj\)"):
        jitbridge.as_array(big_endian, stream=1)


def test_type_whose_attributes_disagree_with_its_cai_is_demoted():
    cls = cupy_like(cai_override={"data": (0x9000, False)})  # the CAI says another pointer
    v = jitbridge.as_array(cls(0x7000, (4,)), stream=1)
    assert v.ptr == 0x9000  # the CAI wins
    assert hooks.adapter_protocol(cls) == "cuda_array_interface"
    assert jitbridge.as_array(cls(0x7000, (4,)), stream=1).ptr == 0x9000


def test_type_missing_an_attribute_is_demoted():
    cls = cupy_like()
    a = cls(0x7000, (4,))
    del a.data  # the CAI property still works; the reader cannot
    cls.__cuda_array_interface__ = property(lambda self: {"shape": (4,), "typestr": "<f4", "data": (0x7000, False),
                                                          "version": 3})
    assert jitbridge.as_array(a, stream=1).ptr == 0x7000
    assert hooks.adapter_protocol(cls) == "cuda_array_interface"


def test_numba_fields_are_read_from_attributes():
    cls = numba_like()
    assert hooks.adapter_protocol(cls) == "numba_fields"
    a = cls(0x8000, (2, 3), "float64")
    v = jitbridge.as_array(a, stream=1)
    assert (v.ptr, v.shape, v.strides, v.dtype) == (0x8000, (2, 3), (3, 1), "float64")
    t = cls(0x8000, (3, 2), "float64", strides=(8, 24))  # a transposed view
    assert jitbridge.as_array(t, stream=1).strides == (1, 3)
    empty = cls(None, (0,), "int32")
    assert jitbridge.as_array(empty, stream=1).ptr == 0
    assert hooks.adapter_protocol(cls) == "numba_fields"


def test_subclasses_keep_the_cai_path():
    base = cupy_like()

    class Sub(base):
        pass

    assert hooks.adapter_protocol(Sub) == "cuda_array_interface"
    assert jitbridge.as_array(Sub(0x7000, (4,)), stream=1).ptr == 0x7000
