"""The launch shortcut's CuPy and Numba readers against the full path, without a GPU: a child on the fake driver
launches with stand-ins of cupy.ndarray (module 'cupy', name 'ndarray') and numba's DeviceNDArray. The shortcut reads
CuPy's fields (data, data.ptr, data.device_id, dtype) through the data descriptors of their types, resolved once per
type version (common/descriptor_reads.cpp), and Numba's (stream, gpu_data, dtype) by PyObject_GetAttr (CPython's
generic lookup called directly for a type without its own __getattribute__ or __getattr__); the stand-ins
keep those fields in slots (C-level descriptors, as CuPy's Cython attributes are) or as plain instance attributes (no
descriptor: read generally, as Numba's are). Each call below is made twice, once on a kernel whose shortcut is learnt
and once on a fresh kernel (the full path alone): both must launch the same bytes or raise the same error. Changes to
the types (a field replaced by a property, a slot's value changed) must be seen by the next call."""
import pytest

from fake_driver import LAUNCH_PRELUDE, run_json_child

CHILD = LAUNCH_PRELUDE + r'''
import json, sys, types
import numpy as np
import jitbridge

for name in ("cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.stream"):
    sys.modules.setdefault(name, types.ModuleType(name))
sys.modules["cupy_backends.cuda.stream"].__pyx_capi__ = {"get_stream_ptr": _hooks.cupy_stream_capsule()}

SRC = r"""extern "C" __global__ void k(const float* a, float* b, int n) {}"""


def cupy_like(slots):
    if slots:
        class Memory:
            __slots__ = ("ptr", "device_id")

            def __init__(self, ptr):
                self.ptr, self.device_id = ptr, 0

        class ndarray:   # noqa: N801
            __slots__ = ("data", "dtype", "shape", "strides", "__weakref__")

            def __init__(self, ptr, dtype="float32"):
                self.data, self.dtype, self.shape, self.strides = Memory(ptr), np.dtype(dtype), (8,), (np.dtype(dtype).itemsize,)
    else:
        class Memory:
            def __init__(self, ptr):
                self.ptr, self.device_id = ptr, 0

        class ndarray:   # noqa: N801
            def __init__(self, ptr, dtype="float32"):
                self.data, self.dtype, self.shape, self.strides = Memory(ptr), np.dtype(dtype), (8,), (np.dtype(dtype).itemsize,)

    def cai(self):
        return {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str,
                "data": (self.data.ptr, False), "version": 3}

    ndarray.__cuda_array_interface__ = property(cai)
    ndarray.__module__, ndarray.__qualname__ = "cupy", "ndarray"
    return ndarray, Memory


results = {}


def with_ptr(a, value):
    a.data.ptr = value
    return a


def launch(k, args):
    before = last_launch()["count"]
    shortcuts = _hooks.shortcut_launches(k)
    try:
        k(1, 32, args)
    except Exception as e:
        return dict(error=f"{type(e).__name__}: {e}", launched=last_launch()["count"] - before)
    return dict(error=None, launched=last_launch()["count"] - before, params=last_launch()["params"],
                shortcut=_hooks.shortcut_launches(k) - shortcuts)


def both(label, make_args):
    """The same call on the learnt kernel and on a fresh one (full path), each with its own arguments."""
    fresh = jitbridge.RawKernel(SRC, "k", arch="sm_90")
    results[label] = dict(shortcut=launch(learnt, make_args()), full=launch(fresh, make_args()))


for slots in (True, False):
    A, Memory = cupy_like(slots)
    tag = "slots" if slots else "dict"
    learnt = jitbridge.RawKernel(SRC, "k", arch="sm_90")
    launch(learnt, (A(0x7F0000010000), A(0x7F0000020000), 8))   # learns the shortcut
    both(f"{tag}: arrays", lambda: (A(0x7F0000030000), A(0x7F0000040000), 8))
    both(f"{tag}: above 2**63", lambda: (A(0x8000000000001000), A(0x7F0000040000), 8))
    both(f"{tag}: wrong dtype", lambda: (A(0x7F0000030000, "float64"), A(0x7F0000040000), 8))
    both(f"{tag}: NULL data", lambda: (A(0), A(0x7F0000040000), 8))
    both(f"{tag}: ptr not an int", lambda: (with_ptr(A(0x7F0000030000), 1.5), A(0x7F0000040000), 8))
    both(f"{tag}: negative ptr", lambda: (with_ptr(A(0x7F0000030000), -4096), A(0x7F0000040000), 8))
    both(f"{tag}: ptr past 2**64", lambda: (with_ptr(A(0x7F0000030000), 2**64 + 4096), A(0x7F0000040000), 8))
    # A slot's value changed in place: read afresh.
    a = A(0x7F0000050000)
    launch(learnt, (a, A(0x7F0000040000), 8))
    a.data = Memory(0x7F0000060000)
    results[f"{tag}: field changed"] = launch(learnt, (a, A(0x7F0000040000), 8))
    # The types change: data becomes a property (A gets a new version), then so does Memory's ptr; then the slot (or
    # the instance attribute) is back.
    m7 = Memory(0x7F0000070000)
    A.data = property(lambda self: m7, lambda self, value: None)
    results[f"{tag}: type changed"] = launch(learnt, (A(0x7F0000010000), A(0x7F0000040000), 8))
    slot = Memory.__dict__.get("ptr")
    Memory.ptr = property(lambda self: 0x7F0000080000, lambda self, value: None)
    results[f"{tag}: pointer type changed"] = launch(learnt, (A(0x7F0000010000), A(0x7F0000040000), 8))
    if slot is not None:
        Memory.ptr = slot
    else:
        del Memory.ptr
    results[f"{tag}: pointer type restored"] = launch(learnt, (A(0x7F0000010000), A(0x7F0000040000), 8))


def numba_like(slots):
    class Pointer:   # gpu_data (weakly referenceable: the shortcut remembers its address per object)
        if slots:
            __slots__ = ("value", "__weakref__")

        def __init__(self, value):
            self.value = value

    class DeviceNDArray:
        if slots:
            __slots__ = ("gpu_data", "dtype", "shape", "strides", "stream", "__weakref__")

        def __init__(self, ptr, dtype="float32", stream=0):
            self.gpu_data, self.dtype, self.shape = Pointer(ptr), np.dtype(dtype), (8,)
            self.strides, self.stream = (np.dtype(dtype).itemsize,), stream

        @property
        def device_ctypes_pointer(self):
            return self.gpu_data

    def cai(self):
        return {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str,
                "data": (self.gpu_data.value, False), "version": 3, "stream": None}

    DeviceNDArray.__cuda_array_interface__ = property(cai)
    DeviceNDArray.__module__ = "numba.cuda.cudadrv.devicearray"
    DeviceNDArray.__qualname__ = "DeviceNDArray"
    return DeviceNDArray, Pointer


for slots in (True, False):
    A, Pointer = numba_like(slots)
    tag = "numba slots" if slots else "numba dict"
    learnt = jitbridge.RawKernel(SRC, "k", arch="sm_90")
    launch(learnt, (A(0x7F0000010000), A(0x7F0000020000), 8))   # learns the shortcut
    both(f"{tag}: arrays", lambda: (A(0x7F0000030000), A(0x7F0000040000), 8))
    both(f"{tag}: wrong dtype", lambda: (A(0x7F0000030000, "float64"), A(0x7F0000040000), 8))
    both(f"{tag}: bound to a stream", lambda: (A(0x7F0000030000, stream=7), A(0x7F0000040000), 8))
    a = A(0x7F0000050000)
    launch(learnt, (a, A(0x7F0000040000), 8))
    a.gpu_data = Pointer(0x7F0000060000)
    results[f"{tag}: field changed"] = launch(learnt, (a, A(0x7F0000040000), 8))

    def missing_stream():
        a = A(0x7F0000030000)
        del a.stream
        return (a, A(0x7F0000040000), 8)

    both(f"{tag}: stream missing", missing_stream)
    if not slots:
        b = A(0x7F0000050000)
        launch(learnt, (b, A(0x7F0000040000), 8))
        b.__dict__ = dict(b.__dict__, gpu_data=Pointer(0x7F0000090000))   # another dict object: read from it
        results[f"{tag}: dict replaced"] = launch(learnt, (b, A(0x7F0000040000), 8))
        A.stream = 0   # a class attribute (A gets a new version): an instance's own still wins, else this one is read
        both(f"{tag}: own stream over the class's", lambda: (A(0x7F0000030000, stream=7), A(0x7F0000040000), 8))
        both(f"{tag}: the class's stream", missing_stream)
    p7 = Pointer(0x7F0000070000)
    A.gpu_data = property(lambda self: p7, lambda self, value: None)
    results[f"{tag}: type changed"] = launch(learnt, (A(0x7F0000010000), A(0x7F0000040000), 8))
    # A __getattribute__ of the type's own (its lookup no longer CPython's generic one) answers every field read.
    p8 = Pointer(0x7F0000080000)
    A.__getattribute__ = lambda self, name: p8 if name == "gpu_data" else object.__getattribute__(self, name)
    results[f"{tag}: __getattribute__"] = launch(learnt, (A(0x7F0000010000), A(0x7F0000040000), 8))
print(json.dumps(results))
'''


@pytest.fixture(scope="module")
def results():
    return run_json_child(CHILD)


def address(params, i):
    return int.from_bytes(bytes.fromhex(params)[8 * i:8 * i + 8], "little")


@pytest.mark.parametrize("tag", ["slots", "dict"])
def test_the_shortcut_launches_what_the_full_path_launches(results, tag):
    for case in ("arrays", "above 2**63"):
        r = results[f"{tag}: {case}"]
        assert r["shortcut"]["error"] is None and r["shortcut"]["launched"] == 1, r
        assert r["shortcut"]["shortcut"] == 1, r          # the learnt kernel took the shortcut
        assert r["full"]["shortcut"] == 0, r              # the fresh one the full path
        assert r["shortcut"]["params"] == r["full"]["params"], r
    assert address(results[f"{tag}: arrays"]["shortcut"]["params"], 0) == 0x7F0000030000
    assert address(results[f"{tag}: above 2**63"]["shortcut"]["params"], 0) == 0x8000000000001000


@pytest.mark.parametrize("tag", ["slots", "dict"])
def test_refusals_after_the_shortcut_are_the_full_paths(results, tag):
    for case in ("wrong dtype", "NULL data", "ptr not an int", "negative ptr", "ptr past 2**64"):
        r = results[f"{tag}: {case}"]
        assert r["full"]["error"] is not None and r["full"]["error"].startswith(("TypeError", "ValueError",
                                                                                 "OverflowError")), r
        assert r["full"]["error"].startswith("TypeError: k: argument 0") or "argument 0" in r["full"]["error"], r
        assert r["shortcut"] == r["full"], r
        assert r["shortcut"]["launched"] == 0, r


@pytest.mark.parametrize("tag", ["numba slots", "numba dict"])
def test_numba_shortcut_agrees_with_the_full_path(results, tag):
    r = results[f"{tag}: arrays"]
    assert r["shortcut"]["shortcut"] == 1 and r["full"]["shortcut"] == 0, r
    assert r["shortcut"]["params"] == r["full"]["params"], r
    assert address(r["shortcut"]["params"], 0) == 0x7F0000030000
    r = results[f"{tag}: wrong dtype"]
    assert r["full"]["error"] is not None and "float64" in r["full"]["error"], r
    assert r["shortcut"] == r["full"], r
    r = results[f"{tag}: bound to a stream"]   # declined by the shortcut; the full path waits for the stream
    assert r["shortcut"]["error"] is None and r["shortcut"]["shortcut"] == 0, r
    assert r["shortcut"]["params"] == r["full"]["params"], r
    for case, want in (("field changed", 0x7F0000060000), ("type changed", 0x7F0000070000),
                       ("__getattribute__", 0x7F0000080000)):
        r = results[f"{tag}: {case}"]
        assert r["error"] is None and r["launched"] == 1 and r["shortcut"] == 1, (case, r)
        assert address(r["params"], 0) == want, (case, r)


@pytest.mark.parametrize("tag", ["slots", "dict"])
def test_changed_fields_and_types_are_read_afresh(results, tag):
    for case, want in (("field changed", 0x7F0000060000), ("type changed", 0x7F0000070000),
                       ("pointer type changed", 0x7F0000080000), ("pointer type restored", 0x7F0000070000)):
        r = results[f"{tag}: {case}"]
        assert r["error"] is None and r["launched"] == 1, (case, r)
        assert address(r["params"], 0) == want, (case, r)


@pytest.mark.parametrize("tag", ["numba slots", "numba dict"])
def test_numba_fields_follow_getattr(results, tag):
    r = results[f"{tag}: stream missing"]   # no attribute: the shortcut declines, the full path says why
    assert r["full"]["error"] is not None and r["full"]["launched"] == 0, r
    assert r["shortcut"] == r["full"], r
    if tag != "numba dict":
        return
    r = results[f"{tag}: dict replaced"]
    assert r["error"] is None and r["launched"] == 1 and r["shortcut"] == 1, r
    assert address(r["params"], 0) == 0x7F0000090000, r
    r = results[f"{tag}: own stream over the class's"]   # stream=7 on the instance: declined, the full path waits
    assert r["shortcut"]["error"] is None and r["shortcut"]["shortcut"] == 0, r
    assert r["shortcut"]["params"] == r["full"]["params"], r
    r = results[f"{tag}: the class's stream"]   # none on the instance: the class's 0, taken by the shortcut
    assert r["shortcut"]["error"] is None and r["shortcut"]["shortcut"] == 1 and r["full"]["shortcut"] == 0, r
    assert r["shortcut"]["params"] == r["full"]["params"], r
