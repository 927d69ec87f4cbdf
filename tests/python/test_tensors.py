"""jitbridge.Tensor and the output allocators on the CPU: what works without a driver (empty arrays, export
formats, ownership of exported capsules) and every refusal, with its argument named."""
import gc

import numpy as np
import pytest

import jitbridge
from testing_hooks import hooks


def no_driver():
    return not jitbridge.driver_info()["found"]


class Wrap:
    """Forwards __dlpack__ / __dlpack_device__ to a jitbridge.Tensor, as another framework's array would."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, **kw):
        return self.t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_empty_array_needs_no_driver_and_describes_itself():
    t = jitbridge.empty((0, 3), "float32")
    assert isinstance(t, jitbridge.Tensor)
    assert t.shape == (0, 3) and t.strides == (3, 1) and t.dtype == "float32"
    assert t.ptr == 0 and t.nbytes == 0 and t.size == 0 and t.ndim == 2 and t.itemsize == 4
    assert t.device.startswith("cuda:") and t.__dlpack_device__() == (2, int(t.device[5:]))
    assert t.stream == 1
    assert repr(t).startswith("jitbridge.Tensor(shape=(0, 3), dtype='float32'")
    e = jitbridge.zeros(0, "bfloat16", device=0)
    assert e.shape == (0,) and e.dtype == "bfloat16" and e.device == "cuda:0"


def test_cuda_array_interface_v3():
    t = jitbridge.empty((0, 2, 5), np.int16, stream=0x4400)
    iface = t.__cuda_array_interface__
    assert iface["version"] == 3
    assert iface["shape"] == (0, 2, 5) and iface["typestr"] == "<i2" and iface["strides"] is None
    # An empty tensor stores no stream (nothing is ever queued for it, and an int handle is not kept alive): it
    # reports the legacy default stream.
    assert iface["data"] == (0, False) and iface["stream"] == 1 and t.stream == 1
    assert jitbridge.empty(0, "bfloat16").__cuda_array_interface__["typestr"] == "<V2"
    assert jitbridge.empty(0, "bool").__cuda_array_interface__["typestr"] == "|b1"


def test_dlpack_capsule_kinds():
    t = jitbridge.empty((0, 4), "float64")
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 3), stream=-1, dl_device=(2, t.__dlpack_device__()[1])))
    assert '"dltensor"' in repr(t.__dlpack__())
    assert '"dltensor"' in repr(t.__dlpack__(max_version=(0, 8)))


def test_capsules_own_the_buffer_until_consumed_or_dropped():
    t = jitbridge.empty((0, 4), "float32")
    base = hooks.buffer_refs(t)
    cap = t.__dlpack__(max_version=(1, 0))
    assert hooks.buffer_refs(t) > base  # the unconsumed capsule's tensor holds the buffer
    del cap
    gc.collect()
    assert hooks.buffer_refs(t) == base  # never consumed: its destructor deleted the tensor
    v = jitbridge.as_array(Wrap(t))  # consumed: the view owns the tensor now
    assert v.shape == (0, 4) and v.dtype == "float32" and v.device == t.device
    assert hooks.buffer_refs(t) > base
    del v
    gc.collect()
    assert hooks.buffer_refs(t) == base
    v = jitbridge.as_array(t)  # directly: jitbridge's own type
    assert v.ptr == t.ptr and v.shape == t.shape and v.stream == t.stream
    assert hooks.adapter_protocol(type(t)) == "jitbridge"


def test_legacy_capsule_round_trip_through_as_array():
    t = jitbridge.empty((0,), "int8")

    class Legacy:
        def __dlpack__(self, stream=None):
            return t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    base = hooks.buffer_refs(t)
    v = jitbridge.as_array(Legacy())
    assert v.dtype == "int8" and v.shape == (0,)
    del v
    gc.collect()
    assert hooks.buffer_refs(t) == base


@pytest.mark.parametrize("kwargs,exc,why", [
    ({"dl_device": (1, 0), "copy": False}, BufferError, r"dl_device=\(1, 0\) asks for host memory .* copy=False"),
    ({"dl_device": (1, 3)}, BufferError, r"dl_device=\(1, 3\) asks for another host"),
    ({"dl_device": (1, "0")}, TypeError, r"dl_device\[1\] must be an int"),
    ({"dl_device": (2, 7)}, BufferError, "does not copy across devices"),
    ({"dl_device": "cuda"}, TypeError, "dl_device must be"),
    ({"stream": "s"}, TypeError, "stream must be an int"),
    ({"stream": -4}, ValueError, "-1 means no sync"),
    ({"max_version": 1}, TypeError, "max_version must be"),
    ({"copy": 1}, TypeError, "copy must be"),
])
def test_dlpack_bad_arguments(kwargs, exc, why):
    t = jitbridge.empty((0,), "float32", device=0)
    with pytest.raises(exc, match=why):
        t.__dlpack__(**kwargs)


def test_tensor_is_final_and_not_constructible():
    with pytest.raises(TypeError):
        jitbridge.Tensor()
    with pytest.raises(TypeError):
        type("Sub", (jitbridge.Tensor,), {})


@pytest.mark.parametrize("fn", [jitbridge.empty, jitbridge.zeros])
def test_allocation_without_a_driver_says_so(fn):
    if not no_driver():
        pytest.skip("a driver is present")
    with pytest.raises(jitbridge.NoDriverError, match="CUDA driver"):
        fn((3, 4), "float32")


@pytest.mark.parametrize("args,kwargs,exc,why", [
    (((2, -3), "float32"), {}, ValueError, r"empty\(shape\): entry 1 is negative"),
    ((-3, "float32"), {}, ValueError, r"empty\(shape\): the size is negative"),
    (("ab", "float32"), {}, TypeError, r"empty\(shape\)"),
    (((2,), "float33"), {}, ValueError, r"empty\(dtype\)"),
    (((2,), "float32"), {"device": "cpu"}, ValueError, "CUDA memory only"),
    (((2,), "float32"), {"device": "gpu0"}, ValueError, r"empty\(device\)"),
    (((2,), "float32"), {"stream": "fast"}, TypeError, r"empty\(stream\)"),
    (((2 ** 62, 2 ** 62), "float32"), {}, ValueError, r"empty: the array's size in bytes overflows"),
    (((2,), "float32"), {"like": 5}, TypeError, r"empty\(like\): int has no DLPack exchange API"),
])
def test_empty_bad_arguments(args, kwargs, exc, why):
    with pytest.raises(exc, match=why):
        jitbridge.empty(*args, **kwargs)


def test_empty_like():
    t = jitbridge.empty((0, 6), "float16")
    u = jitbridge.empty_like(t)
    assert isinstance(u, jitbridge.Tensor) and u.shape == (0, 6) and u.dtype == "float16" and u.device == t.device
    assert jitbridge.empty_like(t, dtype="torch.int32").dtype == "int32"
    with pytest.raises(ValueError, match=r"empty_like\(x\): x is in cpu memory"):
        jitbridge.empty_like(np.zeros(3))
    with pytest.raises(TypeError, match=r"empty_like\(x\): a object is not an array"):
        jitbridge.empty_like(object())
