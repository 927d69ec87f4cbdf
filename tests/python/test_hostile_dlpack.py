"""Hostile DLPack producers on the CPU: capsules with garbage tensors (versioned and legacy), wrong or consumed
capsules, __dlpack__/__dlpack_device__ that raise or return garbage, the DLPack exchange API and the CuPy-like
attribute reader with changing attributes; every refusal typed, naming the argument, and every consumed DLPack
tensor deleted exactly once."""
import sys

import numpy as np
import pytest

import jitbridge
from gpu_frameworks import MADE_UP_ADDRESSES
from hostile import I64_MAX, Index, deletes, refused
from testing_hooks import hooks

pytestmark = MADE_UP_ADDRESSES


# ---- the CuPy-like attribute reader and the exchange API: snapshots, named errors, deleters once -------------------------------------------


def cupy_like():
    class Memory:
        def __init__(self, ptr):
            self.ptr, self.device_id = ptr, 0

    class ndarray:  # noqa: N801
        def __init__(self, ptr, shape):
            self.dtype = np.dtype("float32")
            self.shape = tuple(shape)
            self.strides = tuple(4 * int(np.prod(shape[i + 1:])) for i in range(len(shape)))
            self.data = Memory(ptr)

        @property
        def __cuda_array_interface__(self):
            return {"shape": tuple(self.shape), "strides": tuple(self.strides), "typestr": self.dtype.str,
                    "data": (self.data.ptr, False), "version": 3}

    ndarray.__module__, ndarray.__qualname__ = "cupy", "ndarray"
    return ndarray


def test_cupy_reader_with_a_shape_list_changed_by_an_item():
    cls = cupy_like()
    assert hooks.adapter_protocol(cls) == "cupy_fields"
    a = cls(0x7000, (3, 4))
    jitbridge.as_array(a, stream=1)  # verified against its CAI: stays on the attribute reader
    shape = []
    shape.extend([Index(3, lambda: shape.clear()), 4])
    a.shape = shape
    v = jitbridge.as_array(a, stream=1)
    assert v.shape == (3, 4)


@pytest.mark.parametrize("attr,value,exc,names", [
    ("shape", (3, 2 ** 63), OverflowError, ("as_array(obj)", "shape", "64-bit")),
    ("shape", (3, -4), ValueError, ("as_array(obj)", "negative")),
    ("strides", (16, 2 ** 64), OverflowError, ("as_array(obj)", "strides")),
    ("shape", (1,) * 65, ValueError, ("as_array(obj)", "shape", "64")),
])
def test_cupy_reader_bad_layouts(attr, value, exc, names):
    cls = cupy_like()
    a = cls(0x7000, (3, 4))
    jitbridge.as_array(a, stream=1)
    setattr(a, attr, value)
    if attr == "shape" and len(value) == 65:
        a.strides = (4,) * 65
    with refused(exc, *names):
        jitbridge.as_array(a, stream=1)


def test_cupy_reader_pointer_out_of_range():
    cls = cupy_like()
    a = cls(0x7000, (3, 4))
    jitbridge.as_array(a, stream=1)
    a.data.ptr = 2 ** 64
    with refused(OverflowError, "as_array(obj)", "data.ptr"):
        jitbridge.as_array(a, stream=1)
    a.data.ptr, a.data.device_id = 0x7000, 2 ** 40
    with refused(ValueError, "as_array(obj)", "device_id"):
        jitbridge.as_array(a, stream=1)


def make_framework(dltensor=True):
    class Fake:
        def __init__(self, ptr, shape, dtype="float32", device=(1, 0), owner=None, strides=None):
            self._ptr, self._shape, self._dtype, self._device = ptr, shape, dtype, tuple(device)
            self._strides, self.owner = strides, owner

    Fake.__dlpack_c_exchange_api__ = hooks.exchange_api(dltensor=dltensor, factory=Fake)
    return Fake


@pytest.mark.parametrize("dltensor", [True, False])
def test_exchange_api_refused_tensors_are_deleted_once(dltensor):
    Fake = make_framework(dltensor)
    before = deletes()
    for shape, strides in [((2, -3), None), ((3, 2), (2 ** 62, 1)), ((2,), (I64_MAX,))]:
        with refused(ValueError, "as_array(obj)"):
            jitbridge.as_array(Fake(0x6000, shape, strides=strides), stream=1)
    assert deletes() == before + (0 if dltensor else 3)


# ---- DLPack producers: garbage results, errors named, deleters exactly once ------------------------------------


class Producer:
    def __init__(self, capsule, device=(1, 0)):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


class LegacyProducer(Producer):
    def __dlpack__(self, stream=None):
        return self.capsule


def capsule(kind="versioned", **kw):
    return hooks.capsule(kind, **kw)[0]


BAD_TENSORS = [
    (dict(shape=(), ndim=-1), ValueError, "ndim is negative"),
    (dict(shape=(2, 3), ndim=2, shape_null=True), ValueError, "shape is NULL"),
    (dict(shape=(2, -3)), ValueError, "negative"),
    (dict(shape=(3, 2), strides=(2 ** 62, 1)), ValueError, ""),
    (dict(shape=(2,), strides=(I64_MAX,), dtype="int8"), ValueError, ""),
    (dict(shape=(2,), strides=(-(2 ** 63),), dtype="int8"), ValueError, ""),
    (dict(shape=(2 ** 62, 4)), ValueError, ""),
    (dict(shape=(4,), byte_offset=2 ** 64 - 8), ValueError, ""),
    (dict(shape=(4,), lanes=0), ValueError, "lanes"),
    (dict(shape=(1,) * 65), ValueError, "64"),
    (dict(shape=(4,), data_null=True), ValueError, "NULL"),
]


@pytest.mark.parametrize("kind,producer", [("versioned", Producer), ("legacy", LegacyProducer)])
@pytest.mark.parametrize("kw,exc,why", BAD_TENSORS)
def test_bad_capsules_are_refused_named_and_deleted_once(kind, producer, kw, exc, why):
    before = deletes()
    cap = capsule(kind, **kw)
    with refused(exc, "as_array(obj)", why):
        jitbridge.as_array(producer(cap))
    assert deletes() == before + 1  # the consumer took it (renamed it used_...) and deleted it
    del cap
    assert deletes() == before + 1  # the capsule itself deletes nothing more


def test_unsupported_major_version_is_deleted_once():
    before = deletes()
    with refused(BufferError, "as_array(obj)", "version 2.0"):
        jitbridge.as_array(Producer(capsule(major=2)))
    assert deletes() == before + 1


@pytest.mark.parametrize("kind,exc,why", [("foreign", TypeError, "capsule named 'my_tensor'"),
                                          ("unnamed", TypeError, "capsule named 'NULL'"),
                                          ("used", BufferError, "already consumed"),
                                          ("used_legacy", BufferError, "already consumed")])
def test_wrong_capsules_are_refused_and_left_to_their_owner(kind, exc, why):
    before = deletes()
    cap = capsule(kind)
    with refused(exc, "as_array(obj)", why):
        jitbridge.as_array(Producer(cap))
    assert deletes() == before  # not taken: the capsule still owns its tensor
    del cap
    assert deletes() == before + 1


def test_good_capsule_is_deleted_once_when_the_view_goes():
    before = deletes()
    cap = capsule(shape=(2, 3))
    v = jitbridge.as_array(Producer(cap))
    assert v.shape == (2, 3)
    with refused(BufferError, "as_array(obj)", "already consumed"):
        jitbridge.as_array(Producer(cap))
    del cap
    assert deletes() == before
    del v
    assert deletes() == before + 1


@pytest.mark.parametrize("device,exc,why", [
    ("cuda", TypeError, "returned a str"),
    ((1,), TypeError, "not a (device_type, device_id) tuple"),
    ([2, 0], TypeError, "returned a list"),
    (("2", 0), TypeError, "device type holds a str"),
    ((2 ** 64, 0), OverflowError, "device type"),
])
def test_dlpack_device_garbage_is_named_and_nothing_is_taken(device, exc, why):
    before = deletes()
    cap = capsule()
    with refused(exc, "as_array(obj)", why):
        jitbridge.as_array(Producer(cap, device=device))
    del cap
    assert deletes() == before + 1  # never taken: the capsule deleted it


@pytest.mark.parametrize("raised,exc", [(RuntimeError("no export"), RuntimeError), (ValueError("no export"), ValueError),
                                        (OverflowError("no export"), OverflowError),
                                        (AttributeError("no export"), AttributeError)])
def test_dlpack_raising_is_prefixed_with_the_argument(raised, exc):
    class Raises:
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            raise raised

        def __dlpack_device__(self):
            return (1, 0)

    with refused(exc, "as_array(obj)", "no export") as info:
        jitbridge.as_array(Raises())
    assert info.value.__cause__ is raised


def test_dlpack_own_exception_class_propagates_with_a_note():
    class ProducerError(Exception):
        pass

    class Raises:
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            raise ProducerError("mine")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(ProducerError, match="mine") as info:
        jitbridge.as_array(Raises())
    if sys.version_info >= (3, 11):
        assert any("as_array(obj)" in n for n in info.value.__notes__)


@pytest.mark.parametrize("result", [12, None, b"dltensor", object()])
def test_dlpack_returning_no_capsule(result):
    with refused(TypeError, "as_array(obj)", "not a PyCapsule"):
        jitbridge.as_array(Producer(result))


def test_dlpack_device_raising_is_named():
    class Raises(Producer):
        def __dlpack_device__(self):
            raise ValueError("which device?")

    before = deletes()
    with refused(ValueError, "as_array(obj)", "which device?"):
        jitbridge.as_array(Raises(capsule()))
    assert deletes() == before + 1


def test_instance_attribute_lookup_errors_are_not_swallowed():
    class Odd:
        def __getattr__(self, name):
            raise RuntimeError(f"cannot look up {name}")

    with refused(RuntimeError, "as_array(obj)", "cannot look up __cuda_array_interface__"):
        jitbridge.as_array(Odd())
