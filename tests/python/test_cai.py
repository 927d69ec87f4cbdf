"""jitbridge.as_array on __cuda_array_interface__ dicts (fields, typestrs, versions, masks, streams and every kind
of malformed dict) and the explicit stream= forms, on the CPU with made-up addresses."""
import numpy as np
import pytest

import jitbridge
from array_producers import CAI, cai
from gpu_frameworks import MADE_UP_ADDRESSES

pytestmark = MADE_UP_ADDRESSES


# ---- __cuda_array_interface__ --------------------------------------------------------------------------


def test_cai_fields_strides_in_bytes_become_elements():
    v = jitbridge.as_array(cai(shape=(4, 3), strides=(4, 16), data=(0xABC000, True), typestr="<f4"))
    assert v.ptr == 0xABC000 and v.shape == (4, 3) and v.strides == (1, 4)
    assert v.readonly and v.device == "cuda:0" and v.dtype == "float32"
    assert jitbridge.as_array(cai(strides=None)).strides == (3, 1)
    assert jitbridge.as_array(cai(strides=...)).strides == (3, 1)


@pytest.mark.parametrize("typestr,dtype", [("<f2", "float16"), ("<f8", "float64"), ("|b1", "bool"), ("|i1", "int8"),
                                           ("<u2", "uint16"), ("<i8", "int64"), ("<c8", "complex64"),
                                           ("<c16", "complex128"), ("<V2", "bfloat16")])
def test_cai_typestrs(typestr, dtype):
    assert jitbridge.as_array(cai(typestr=typestr, strides=None)).dtype == dtype


def test_cai_v2_and_zero_size_with_null_pointer():
    v = jitbridge.as_array(cai(version=2, shape=(0, 5), data=(0, False)))
    assert v.size == 0 and v.ptr == 0
    assert jitbridge.as_array(cai(version=3, shape=(), data=(0x1000, False))).ndim == 0


@pytest.mark.parametrize("key", ["shape", "typestr", "data", "version"])
def test_cai_missing_key_is_named(key):
    with pytest.raises(ValueError, match=rf"as_array\(obj\): __cuda_array_interface__ has no '{key}' key"):
        jitbridge.as_array(cai(**{key: ...}))


@pytest.mark.parametrize("typestr,why", [(">f4", "big-endian"), ("<q4", "not a supported dtype"),
                                         ("<f3", "not a supported dtype"), ("f", "malformed"), ("<f", "malformed")])
def test_cai_bad_typestr(typestr, why):
    with pytest.raises(ValueError, match=rf"as_array\(obj\).*{why}"):
        jitbridge.as_array(cai(typestr=typestr))


def test_cai_null_pointer_with_elements():
    with pytest.raises(ValueError, match=r"as_array\(obj\): data pointer is 0 but the array is not empty"):
        jitbridge.as_array(cai(data=(0, False)))


@pytest.mark.parametrize("version", [4, 17])
def test_cai_version_above_3(version):
    with pytest.raises(ValueError, match=rf"version {version} is not supported"):
        jitbridge.as_array(cai(version=version))


def test_cai_mask_is_refused():
    with pytest.raises(BufferError, match=r"as_array\(obj\).*mask"):
        jitbridge.as_array(cai(mask=cai()))
    assert jitbridge.as_array(cai(mask=None)).shape == (4, 3)


def test_cai_stream_zero_is_invalid():
    with pytest.raises(ValueError, match=r"stream 0 is not allowed"):
        jitbridge.as_array(cai(stream=0))


def test_cai_same_stream_needs_no_event():
    # Producer stream == consumer stream: nothing to order, so this works without a driver too.
    assert jitbridge.as_array(cai(stream=1)).stream == 1
    v = jitbridge.as_array(cai(stream=0x5000), stream=0x5000)
    assert v.stream == 0x5000


def test_cai_other_stream_needs_the_driver():
    if jitbridge.driver_info()["found"]:
        pytest.skip("a driver is present: the no-driver error cannot be observed here")
    with pytest.raises(jitbridge.NoDriverError):
        jitbridge.as_array(cai(stream=0x5000))  # an event is due: consumer is the legacy stream


@pytest.mark.parametrize("bad,exc,why", [
    ({"shape": "44"}, TypeError, "'shape' is a str"),
    ({"shape": (4, 3.0)}, TypeError, "shape holds a float"),
    ({"shape": (4, -3)}, ValueError, r"shape\[1\] is negative"),
    ({"shape": (2 ** 62, 2 ** 62)}, ValueError, "overflows"),
    ({"data": 0x1000}, TypeError, r"'data' must be a \(pointer, read_only\) tuple"),
    ({"data": (-5, False)}, ValueError, "negative"),
    ({"strides": (4,)}, ValueError, "strides has 1 entries for 2 dimensions"),
    ({"strides": (12, 3)}, ValueError, "not a multiple of the item size"),
    ({"typestr": 4}, TypeError, "'typestr' is a int"),
    ({"version": "3"}, TypeError, "'version' holds a str"),
])
def test_cai_malformed(bad, exc, why):
    with pytest.raises(exc, match=why):
        jitbridge.as_array(cai(**bad))


def test_cai_not_a_dict():
    with pytest.raises(TypeError, match="is a list, not a dict"):
        jitbridge.as_array(CAI([1, 2]))


# ---- streams -----------------------------------------------------------------------------------------------


class CudaStreamProtocol:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class TorchLikeStream:
    cuda_stream = 0x9000


class CupyLikeStream:
    ptr = 0xA000


@pytest.mark.parametrize("stream,value", [(None, 1), (0, 1), (1, 1), (2, 2), (0x7000, 0x7000),
                                          (CudaStreamProtocol(0x8000), 0x8000), (TorchLikeStream(), 0x9000),
                                          (CupyLikeStream(), 0xA000), (CudaStreamProtocol(0), 1)])
def test_explicit_stream_forms(stream, value):
    v = jitbridge.as_array(cai(stream=None), stream=stream)
    assert v.stream == value


@pytest.mark.parametrize("stream,exc", [(True, TypeError), ("s", TypeError), (-3, ValueError), (2.0, TypeError),
                                        (object(), TypeError)])
def test_bad_explicit_stream(stream, exc):
    with pytest.raises(exc, match="stream"):
        jitbridge.as_array(np.zeros(3), stream=stream)


@pytest.mark.parametrize("typestr,name", [("|V63000", "void504000"), ("<V0000063000", "void504000"),
                                          ("|V65535", "void524280"), ("|V3", "void24")])
def test_cai_structured_items_of_any_opaque_size(typestr, name):
    # A CuPy structured array exports |V<itemsize>; jitbridge's opaque dtypes hold up to 0xFFFF bytes.
    assert jitbridge.as_array(cai(typestr=typestr, shape=(2,))).dtype == name


@pytest.mark.parametrize("typestr", ["|V65536", "|V0", "|V" + "9" * 30])
def test_cai_structured_items_too_big_are_unsupported_not_malformed(typestr):
    with pytest.raises(ValueError, match=r"as_array\(obj\): typestr .* is not a supported dtype"):
        jitbridge.as_array(cai(typestr=typestr, shape=(2,)))
