"""jitbridge.from_ptr on the CPU: fields and owner, host memory, dtype spellings (names, typestrs, NumPy and torch
dtypes, opaque bytes), bad input, and the views it makes exported through DLPack and __cuda_array_interface__."""
import gc
import weakref

import numpy as np
import pytest

import jitbridge
from gpu_frameworks import MADE_UP_ADDRESSES

pytestmark = MADE_UP_ADDRESSES

RNG = np.random.default_rng(1234)


# ---- from_ptr -----------------------------------------------------------------------------------------------


def test_from_ptr_fields_and_owner():
    class Owner:
        pass

    owner = Owner()
    ref = weakref.ref(owner)
    v = jitbridge.from_ptr(0x7F0000001000, (3, 4), "bfloat16", device=0, strides=(1, -3), owner=owner)
    assert v.ptr == 0x7F0000001000 and v.shape == (3, 4) and v.strides == (1, -3)
    assert v.dtype == "bfloat16" and v.device == "cuda:0" and v.obj is owner and v.stream == 1
    del owner
    gc.collect()
    assert ref() is not None
    del v
    gc.collect()
    assert ref() is None


def test_from_ptr_host_memory_roundtrips_numpy():
    a = RNG.standard_normal((2, 5)).astype(np.float32)
    v = jitbridge.from_ptr(a.ctypes.data, a.shape, a.dtype, device="cpu", owner=a, readonly=True)
    assert v.device == "cpu" and v.readonly and v.strides == (5, 1) and v.dtype == "float32"
    assert jitbridge.as_array(v).ptr == a.ctypes.data  # jitbridge's own views are read directly


@pytest.mark.parametrize("dtype,name", [("float32", "float32"), ("f4", "float32"), ("<c8", "complex64"),
                                        ("torch.bfloat16", "bfloat16"), ("torch.float8_e4m3fn", "float8_e4m3fn"),
                                        ("half", "float16"), (float, "float64"), (bool, "bool"), (int, "int64"),
                                        (np.uint16, "uint16"), (np.dtype("int8"), "int8"), ("d", "float64")])
def test_dtype_spellings(dtype, name):
    assert jitbridge.from_ptr(0x1000, 2, dtype).dtype == name


@pytest.mark.parametrize("kwargs,exc,why", [
    ({"ptr": 0}, ValueError, "data is NULL"),
    ({"ptr": -1}, ValueError, "ptr is negative"),
    ({"ptr": 1.5}, TypeError, "ptr must be an int"),
    ({"shape": (2, -1)}, ValueError, r"from_ptr\(shape\): entry 1 is negative"),
    ({"shape": "ab"}, TypeError, "expected ints"),
    ({"dtype": "float33"}, ValueError, r"from_ptr\(dtype\).*not a dtype"),
    ({"dtype": np.dtype(">f4")}, ValueError, "big-endian"),
    ({"dtype": "1int"}, ValueError, r"from_ptr\(dtype\): dtype .* is a subarray dtype"),  # NumPy: ('<i8', (1,))
    ({"dtype": np.dtype(("<f4", (2, 3)))}, ValueError, "subarray dtype"),
    ({"dtype": None}, TypeError, "a dtype is required"),
    ({"device": "tpu:0"}, ValueError, r"from_ptr\(device\)"),
    ({"strides": (1,)}, ValueError, "strides has 1 entries for 2 dimensions"),
    ({"shape": (2 ** 40, 2 ** 40)}, ValueError, "overflows"),
])
def test_from_ptr_bad_input(kwargs, exc, why):
    args = {"ptr": 0x1000, "shape": (2, 3), "dtype": "float32"}
    args.update(kwargs)
    with pytest.raises(exc, match=why):
        jitbridge.from_ptr(**args)


def test_array_view_dlpack_errors_and_cuda_array_interface():
    v = jitbridge.from_ptr(0x10000, (2, 3), "float32", device="cuda:0", strides=(1, 2))
    cai = v.__cuda_array_interface__
    assert cai["data"] == (0x10000, False)
    assert cai["strides"] == (4, 8)
    assert cai["typestr"] == "<f4" and cai["version"] == 3
    with pytest.raises(BufferError, match="cannot copy"):
        v.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="does not copy across devices"):
        v.__dlpack__(dl_device=(1, 0))
    with pytest.raises(AttributeError, match="cpu memory has no __cuda_array_interface__"):
        jitbridge.as_array(np.zeros(3)).__cuda_array_interface__


def test_from_ptr_numpy_void_dtypes_are_opaque_bytes():
    # An unstructured void and a structured dtype are items of opaque bytes, as the text "V8" is.
    for d in (np.dtype("V8"), "V8", np.dtype([("x", "<f4"), ("y", "<i4")])):
        v = jitbridge.from_ptr(0x1000, (3,), d)
        assert (v.dtype, v.nbytes) == ("void64", 24)


# ---- devices the machine has (issue 28) ---------------------------------------------------------------------

DEVICES_CHILD = r'''
import json
import jitbridge
out = {}
for device in (0, 1, "cuda:1", (2, 1), 2, "cuda:7", (2, 99), "cpu", (1, 0)):
    try:
        out[repr(device)] = jitbridge.from_ptr(0x7F0000001000, (4,), "float32", device=device).device
    except Exception as e:
        out[repr(device)] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
'''


def test_from_ptr_refuses_devices_the_driver_does_not_have():
    from fake_driver import run_json_child
    got = run_json_child(DEVICES_CHILD, devices=2)   # the fake driver with cuda:0 and cuda:1
    assert (got["0"], got["1"], got["'cuda:1'"], got["(2, 1)"]) == ("cuda:0", "cuda:1", "cuda:1", "cuda:1"), got
    assert got["'cpu'"] == got["(1, 0)"] == "cpu", got
    for key, name in (("2", "cuda:2"), ("'cuda:7'", "cuda:7"), ("(2, 99)", "cuda:99")):
        assert got[key] == (f"ValueError: from_ptr(device): {name} does not exist: the CUDA driver sees 2 devices "
                            "(cuda:0 to cuda:1)"), got


def test_from_ptr_without_a_driver_describes_any_device(gpu_absent_reason):
    # nothing to ask: a view is a description, and any launch on it needs a driver, which refuses it then
    assert jitbridge.from_ptr(0x7F0000001000, (4,), "float32", device=5).device == "cuda:5"


# ---- fp8 through __cuda_array_interface__ (issue 28) ------------------------------------------------------------

@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                  "float8_e8m0fnu"])
def test_fp8_views_round_trip_through_the_cuda_array_interface(name):
    v = jitbridge.from_ptr(0x7F0000001000, (4, 3), name, device=0)
    cai = v.__cuda_array_interface__
    assert cai["typestr"] == "|V1" and cai["descr"] == [(name, "|V1")]   # CuPy and Numba read the typestr: bytes

    class Holder:
        __cuda_array_interface__ = cai

    back = jitbridge.as_array(Holder())
    assert (back.dtype, back.shape, back.ptr) == (name, (4, 3), 0x7F0000001000)


def test_a_plain_v1_stays_bytes():
    for descr in (None, [("", "|V1")], [("float32", "|V1")], [("float8_e4m3fn", "|V2")], [["float8_e4m3fn", "|V1"]],
                  [("float8_e4m3fn", "|V1"), ("x", "|V1")], "float8_e4m3fn", [("float8_e4m3fn\ud800", "|V1")]):
        cai = {"shape": (4,), "typestr": "|V1", "data": (0x7F0000001000, False), "version": 3}
        if descr is not None:
            cai["descr"] = descr

        class Holder:
            __cuda_array_interface__ = cai

        assert jitbridge.as_array(Holder()).dtype == "void8", descr
