"""Outputs from the allocator of the framework they are like (issue 28), without a GPU: empty_like / empty(like=) /
zeros(like=) of a cupy.ndarray or a Numba DeviceNDArray call that framework's own allocation functions (so its pool,
set_allocator and RMM are honoured) with the shape, dtype, device and stream asked for, and return its array.

A child Python gets stand-in `cupy` and `numba.cuda` modules that record every call (the real ones need a GPU;
tests/python/test_framework_outputs_gpu.py checks the pools there); the types are recognised exactly."""
import pytest

from fake_driver import run_json_child

CHILD = r'''
import json, sys, types
import numpy as np

calls = []


class Device:
    current = 0

    def __init__(self, id):
        self.id = id

    def __enter__(self):
        self.saved, Device.current = Device.current, self.id
        calls.append(("enter device", self.id))

    def __exit__(self, *exc):
        Device.current = self.saved


class ndarray:
    def __init__(self, shape, dtype, device):
        self.shape, self.dtype, self.device = tuple(shape), np.dtype(dtype), Device(device)


def allocator(name):
    def make(shape, dtype=np.float64):
        calls.append((name, list(shape), str(np.dtype(dtype)), Device.current))
        return ndarray(shape, dtype, Device.current)
    return make


class Stream:
    def record(self):
        calls.append(("record on cupy's stream",))
        return "event"


class ExternalStream:
    def __init__(self, handle):
        self.handle = handle

    def wait_event(self, event):
        calls.append(("wait", self.handle, event))


cupy = types.ModuleType("cupy")
cupy.ndarray, cupy.empty, cupy.zeros = ndarray, allocator("cupy.empty"), allocator("cupy.zeros")
cupy.cuda = types.SimpleNamespace(Device=Device, ExternalStream=ExternalStream, get_current_stream=Stream,
                                  runtime=types.SimpleNamespace(getDevice=lambda: Device.current))
sys.modules["cupy"] = cupy


class DeviceNDArray:
    def __init__(self, shape, dtype, stream=0):
        self.shape, self.dtype, self.stream = tuple(shape), np.dtype(dtype), stream
        self.size = int(np.prod(shape))
        self.nbytes = self.size * self.dtype.itemsize


def device_array(shape, dtype=np.float64, stream=0):
    calls.append(("numba.cuda.device_array", list(shape), str(np.dtype(dtype)), str(stream)))
    return DeviceNDArray(shape, dtype, stream)


numba_arrays = types.ModuleType("numba.cuda.cudadrv.devicearray")
numba_arrays.DeviceNDArray = DeviceNDArray
numba_cuda = types.ModuleType("numba.cuda")
numba_cuda.device_array = device_array
numba_cuda.external_stream = lambda handle: f"external {handle:#x}"
numba_driver = types.ModuleType("numba.cuda.cudadrv.driver")
numba_driver.device_memset = lambda a, v, n, stream=0: calls.append(("numba memset", v, n, str(stream)))
sys.modules["numba.cuda.cudadrv.driver"] = numba_driver
sys.modules["numba.cuda.cudadrv.devicearray"] = numba_arrays
sys.modules["numba.cuda"] = numba_cuda

import jitbridge

out = {}


def record(label, fn):
    del calls[:]
    try:
        r = fn()
        got = [type(r).__name__, list(r.shape), str(r.dtype)]
    except Exception as e:
        got = f"{type(e).__name__}: {e}"
    out[label] = dict(result=got, calls=[list(c) for c in calls])


x = ndarray((3, 4), "float32", 0)
record("empty_like", lambda: jitbridge.empty_like(x))
record("empty_like dtype", lambda: jitbridge.empty_like(x, dtype="int16"))
record("empty_like on cuda:1", lambda: jitbridge.empty_like(ndarray((5,), "float64", 1)))
record("empty_like stream", lambda: jitbridge.empty_like(x, stream=0x1234))
record("empty like", lambda: jitbridge.empty((2, 3), "float16", like=x))
record("empty like type", lambda: jitbridge.empty(7, "int8", like=ndarray))
record("zeros like", lambda: jitbridge.zeros((2, 3), "float64", like=x, device="cuda:1"))
record("bfloat16", lambda: jitbridge.empty_like(x, dtype="bfloat16"))
record("cpu", lambda: jitbridge.empty((2,), "float32", like=x, device="cpu"))


class Sub(ndarray):
    pass


record("subclass", lambda: jitbridge.empty((2,), "float32", like=Sub((1,), "float32", 0)))
n = DeviceNDArray((4, 2), "int32", stream="bound stream")
record("numba empty_like", lambda: jitbridge.empty_like(n))
record("numba zeros like", lambda: jitbridge.zeros((6,), "uint8", like=DeviceNDArray, stream=0x99))
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def got():
    return run_json_child(CHILD)


def test_cupy_arrays_get_cupy_arrays_from_cupys_allocator(got):
    assert got["empty_like"] == dict(result=["ndarray", [3, 4], "float32"], calls=[["cupy.empty", [3, 4], "float32", 0]])
    assert got["empty_like dtype"]["calls"] == [["cupy.empty", [3, 4], "int16", 0]]
    assert got["empty like"]["calls"] == [["cupy.empty", [2, 3], "float16", 0]]
    assert got["empty like type"]["calls"] == [["cupy.empty", [7], "int8", 0]]


def test_on_the_arrays_device_and_after_cupys_stream(got):
    assert got["empty_like on cuda:1"]["calls"] == [["enter device", 1], ["cupy.empty", [5], "float64", 1]]
    assert got["zeros like"]["calls"] == [["enter device", 1], ["cupy.zeros", [2, 3], "float64", 1]]
    # stream= waits for CuPy's current stream, where the allocation is ordered
    assert got["empty_like stream"]["calls"] == [["cupy.empty", [3, 4], "float32", 0], ["enter device", 0],
                                                 ["record on cupy's stream"], ["wait", 0x1234, "event"]]


def test_what_cupy_cannot_hold_is_refused(got):
    assert got["bfloat16"]["result"].startswith("TypeError: empty_like(dtype): 'bfloat16' is no NumPy dtype")
    assert got["cpu"]["result"].startswith("ValueError: empty(device): 'cpu': a CuPy array goes on a CUDA device")
    assert got["subclass"]["calls"] == [] and "has no DLPack exchange API" in got["subclass"]["result"]


def test_numba_arrays_get_numba_arrays_on_their_stream(got):
    assert got["numba empty_like"] == dict(result=["DeviceNDArray", [4, 2], "int32"],
                                           calls=[["numba.cuda.device_array", [4, 2], "int32", "bound stream"]])
    assert got["numba zeros like"]["calls"] == [["numba.cuda.device_array", [6], "uint8", "external 0x99"],
                                                ["numba memset", 0, 6, "external 0x99"]]
