"""Host round trips without a GPU (issue 28): jitbridge.asarray uploads host arrays, Tensor.__dlpack__(dl_device=
(kDLCPU, 0)) hands over host copies (numpy.from_dlpack(t, device="cpu")), and both refuse what they cannot do.

The copies run in a child on the fake driver of tests/fuzz/fake_cuda, whose allocations hold real bytes once a copy
touches them and which records each copy's stream and each cuStreamSynchronize; refusals and empty arrays (which
need no driver) run here."""

import numpy as np
import pytest

import jitbridge
from fake_driver import run_json_child
from gpu_frameworks import MADE_UP_ADDRESSES

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
          "float64", "complex64", "complex128"]

CHILD = r'''
import array, ctypes, gc, json
import numpy as np
import jitbridge

FAKE = ctypes.CDLL("libcuda.so.1")


class Copy(ctypes.Structure):   # tests/fuzz/fake_cuda/fake_cuda.h, FakeCudaCopy
    _fields_ = [("count", ctypes.c_uint64), ("kind", ctypes.c_int), ("bytes", ctypes.c_size_t),
                ("stream", ctypes.c_size_t), ("syncs", ctypes.c_uint64), ("synced_stream", ctypes.c_size_t)]


def last_copy():
    c = Copy()
    FAKE.fake_cuda_last_copy(ctypes.byref(c))
    return {f: getattr(c, f) for f, _ in Copy._fields_}


rng = np.random.default_rng()
out = {"round_trips": [], "errors": {}}


def random_array(dtype, shape):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("complex"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


for dtype in %(dtypes)r:
    for shape in [(1000,), (7, 13), (), (0,), (3, 0, 2)]:
        a = random_array(dtype, shape)
        t = jitbridge.asarray(a)
        back = np.from_dlpack(t, device="cpu")
        out["round_trips"].append(dict(dtype=dtype, shape=list(shape), same_dtype=str(back.dtype) == dtype,
                                       same_shape=back.shape == a.shape, equal=bool(np.array_equal(back, a)),
                                       tensor=[t.dtype, list(t.shape)]))

# a strided, a reversed and a read-only source; a buffer-protocol source; a legacy capsule; zeros
a = random_array("float32", (20, 30))
checks = {}
checks["strided"] = bool(np.array_equal(np.from_dlpack(jitbridge.asarray(a[::3, ::-2]), device="cpu"), a[::3, ::-2]))
ro = a.copy()
ro.flags.writeable = False
checks["readonly"] = bool(np.array_equal(np.from_dlpack(jitbridge.asarray(ro), device="cpu"), ro))
buf = array.array("i", range(-50, 50))
checks["array.array"] = bool(np.array_equal(np.from_dlpack(jitbridge.asarray(buf), device="cpu"), np.array(buf)))
mv = memoryview(np.arange(40, dtype=np.float64).reshape(4, 10)[:, ::3])   # a strided buffer
checks["memoryview"] = bool(np.array_equal(np.from_dlpack(jitbridge.asarray(mv), device="cpu"),
                                           np.arange(40, dtype=np.float64).reshape(4, 10)[:, ::3]))
checks["zeros"] = bool(np.array_equal(np.from_dlpack(jitbridge.zeros((5, 5), "int32"), device="cpu"),
                                      np.zeros((5, 5), np.int32)))
t = jitbridge.asarray(a)
legacy = np.from_dlpack(type("Legacy", (), {"__dlpack__": lambda self, **kw: t.__dlpack__(dl_device=(1, 0)),
                                            "__dlpack_device__": lambda self: (1, 0)})())
checks["legacy capsule"] = bool(np.array_equal(legacy, a))
checks["asarray of a tensor is the tensor"] = jitbridge.asarray(t) is t and jitbridge.asarray(t, device=0) is t
# the host copy outlives the tensor; the tensor outlives the upload's source
b = np.from_dlpack(t, device="cpu")
u = jitbridge.asarray(a.copy())
del t
gc.collect()
checks["copy outlives tensor"] = bool(np.array_equal(b, a))
checks["upload outlives source"] = bool(np.array_equal(np.from_dlpack(u, device="cpu"), a))
out["checks"] = checks

# streams: the copy runs on the stream asked for (or the tensor's), and the host waits for it
t = jitbridge.asarray(a, stream=0x1234)
up = last_copy()
out["upload"] = dict(up, tensor_stream=t.stream)
np.from_dlpack(t, device="cpu")
out["download default"] = last_copy()
t.__dlpack__(dl_device=(1, 0), stream=0x5678, copy=True)
out["download on a stream"] = last_copy()

for label, call in [("copy=False", lambda: t.__dlpack__(dl_device=(1, 0), copy=False)),
                    ("cpu device 1", lambda: t.__dlpack__(dl_device=(1, 1))),
                    ("another gpu", lambda: t.__dlpack__(dl_device=(2, 1))),
                    ("numpy copy=False", lambda: np.from_dlpack(t, device="cpu", copy=False))]:
    try:
        call()
        out["errors"][label] = None
    except Exception as e:
        out["errors"][label] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
''' % {"dtypes": DTYPES}


@pytest.fixture(scope="module")
def child():
    return run_json_child(CHILD)


def test_every_dtype_round_trips_through_the_device(child):
    assert len(child["round_trips"]) == len(DTYPES) * 5
    for r in child["round_trips"]:
        assert r["same_dtype"] and r["same_shape"] and r["equal"], r
        assert r["tensor"] == [r["dtype"], r["shape"]], r


def test_strided_read_only_and_buffer_sources(child):
    assert child["checks"] == {k: True for k in child["checks"]}
    assert len(child["checks"]) == 9


def test_copies_run_on_the_stream_asked_for_and_the_host_waits(child):
    up = child["upload"]
    assert up["kind"] == 1 and up["stream"] == 0x1234 == up["synced_stream"] == up["tensor_stream"], up
    down = child["download default"]   # the tensor's stream
    assert down["kind"] == 2 and down["stream"] == 0x1234 == down["synced_stream"], down
    assert down["syncs"] == up["syncs"] + 1 and down["bytes"] == 20 * 30 * 4, down
    on = child["download on a stream"]
    assert on["kind"] == 2 and on["stream"] == 0x5678 == on["synced_stream"] and on["syncs"] == down["syncs"] + 1, on


def test_what_cannot_be_done_is_refused_precisely(child):
    e = child["errors"]
    assert e["copy=False"].startswith("BufferError: Tensor.__dlpack__: dl_device=(1, 0) asks for host memory but the "
                                      "tensor is on cuda:0 and copy=False"), e
    assert e["numpy copy=False"].startswith("BufferError"), e
    assert e["cpu device 1"] == ("BufferError: Tensor.__dlpack__: dl_device=(1, 1) asks for another host than (1, 0); "
                                 "a host copy goes to (1, 0)"), e
    assert e["another gpu"].startswith("BufferError: Tensor.__dlpack__: dl_device=(2, 1) was asked for, but the "
                                       "array is on cuda:0"), e


def test_empty_arrays_need_no_driver():
    for dtype in DTYPES:
        for shape in [(0,), (4, 0)]:
            t = jitbridge.asarray(np.zeros(shape, dtype))
            assert (t.dtype, t.shape) == (dtype, shape)
            back = np.from_dlpack(t, device="cpu")
            assert back.shape == shape and back.dtype == np.dtype(dtype)


@MADE_UP_ADDRESSES
def test_asarray_refuses_what_it_cannot_upload():
    with pytest.raises(TypeError, match=r"asarray\(x\): a str is not an array"):
        jitbridge.asarray("123")
    with pytest.raises(ValueError, match=r"asarray\(x\): x is in cuda:0 memory already"):
        jitbridge.asarray(jitbridge.from_ptr(0x7F0000001000, (4,), "float32", device="cuda:0"))
    with pytest.raises(ValueError, match=r"asarray\(device\): a jitbridge.Tensor lives in CUDA memory"):
        jitbridge.asarray(np.zeros(3), device="cpu")
    with pytest.raises(TypeError, match=r"asarray\(x\): a memoryview of items 'T\{"):
        jitbridge.asarray(memoryview(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")])))
    with pytest.raises(TypeError, match=r"asarray\(stream\)"):
        jitbridge.asarray(np.zeros(3), stream="s")
    with pytest.raises(BufferError, match="big-endian|byte order|not supported|only"):
        jitbridge.asarray(np.zeros(3, dtype=">f4"))


def test_asarray_without_a_driver_says_so(gpu_absent_reason):
    with pytest.raises(jitbridge.NoDriverError):
        jitbridge.asarray(np.ones(3, np.float32))
