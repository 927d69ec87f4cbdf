"""Hostile array input on the CPU: __cuda_array_interface__ dicts and from_ptr / dtype / shape / device / stream
arguments whose dunders raise or change what is being read (emptied dicts, lists rewritten mid-read, lying tuple
subclasses), garbage fields and values at the int64 limits; every refusal typed and naming the argument. DLPack
producers: test_hostile_dlpack.py."""
import itertools

import numpy as np
import pytest

import jitbridge
from array_producers import CAI  # __cuda_array_interface__ as a property returning the same dict object each time
from gpu_frameworks import MADE_UP_ADDRESSES
from hostile import I64_MAX, Index, refused

pytestmark = MADE_UP_ADDRESSES


def fresh(text):
    """A new str object (not interned, not shared): freed as soon as the dict lets go of it."""
    return "".join(list(text))


def cai_dict(**fields):
    d = {"shape": tuple([4, 3]), "typestr": fresh("<f4"), "data": (0x10000 + 0, False), "version": 3}
    d.update(fields)
    return d


class Flag:
    """A read-only flag whose __bool__ runs `action` first."""

    def __init__(self, value, action):
        self.value, self.action = value, action

    def __bool__(self):
        self.action()
        return self.value


def refill(d):
    """Empties `d` (freeing the values only it held) and fills it with different, valid-looking values."""
    d.clear()
    for i in range(64):  # reuse the freed memory with other objects
        d[f"junk{i}"] = [i] * 8
    d.update({"shape": (7,), "typestr": "<i1", "data": (0x999000, True), "version": 2})


# ---- 1. borrowed references across Python code: the CAI dict --------------------------------------------------


def test_cai_read_only_flag_that_empties_the_dict_reads_the_values_it_was_given():
    d = cai_dict()
    d["data"] = (0x10000 + 0, Flag(True, lambda: refill(d)))
    d["strides"] = tuple([12, 4])
    v = jitbridge.as_array(CAI(d))
    assert (v.ptr, v.shape, v.strides, v.dtype, v.readonly) == (0x10000, (4, 3), (3, 1), "float32", True)
    assert d["shape"] == (7,)  # the refill happened


def test_cai_shape_index_that_deletes_keys_and_replaces_the_list():
    d = cai_dict()
    shape = [Index(4, lambda: (d.clear(), shape.clear(), shape.extend([1] * 40))), 3, 5]
    d["shape"] = shape
    v = jitbridge.as_array(CAI(d))
    assert v.shape == (4, 3, 5) and v.dtype == "float32" and v.ptr == 0x10000
    assert d == {} and len(shape) == 40


def test_cai_shape_list_shrunk_by_an_item_is_read_from_a_snapshot():
    shape = []
    shape.extend([2, Index(3, lambda: shape.clear()), 5, 7])
    v = jitbridge.as_array(CAI(cai_dict(shape=shape)))
    assert v.shape == (2, 3, 5, 7)


def test_cai_strides_index_that_rewrites_the_strides_list():
    strides = []
    strides.extend([Index(12, lambda: strides.__setitem__(slice(None), [object()] * 5)), 4])
    v = jitbridge.as_array(CAI(cai_dict(strides=strides)))
    assert v.strides == (3, 1)


def test_cai_stream_index_that_empties_the_dict():
    d = cai_dict()
    d["stream"] = Index(0x5000, lambda: refill(d))
    v = jitbridge.as_array(CAI(d), stream=0x5000)  # same stream: no event needed
    assert (v.shape, v.stream, v.dtype) == ((4, 3), 0x5000, "float32")


def test_cai_tuple_and_list_subclasses_are_read_from_their_storage():
    class LyingTuple(tuple):
        def __len__(self):
            return 1000

        def __getitem__(self, i):
            raise AssertionError("items are read from the tuple's storage")

        def __iter__(self):
            raise AssertionError("not iterated")

    class LyingList(list):
        def __len__(self):
            return 0

        def __iter__(self):
            raise AssertionError("not iterated")

    v = jitbridge.as_array(CAI(cai_dict(shape=LyingTuple((4, 3)), strides=LyingList([12, 4]),
                                        data=LyingTuple((0x20000, False)))))
    assert (v.shape, v.strides, v.ptr) == ((4, 3), (3, 1), 0x20000)


def test_cai_key_whose_eq_empties_the_dict_during_lookup():
    class Collider:
        def __init__(self, d):
            self.d = d

        def __hash__(self):
            return hash("shape")

        def __eq__(self, other):
            self.d.clear()
            return False

    d = {}
    d[Collider(d)] = 1
    d.update(cai_dict())
    try:
        v = jitbridge.as_array(CAI(d))
    except ValueError as e:  # the dict was emptied before 'shape' was found
        assert "as_array(obj): __cuda_array_interface__ has no" in str(e)
    else:
        assert v.shape == (4, 3)


def test_cai_numpy_integers_are_ints():
    v = jitbridge.as_array(CAI(cai_dict(shape=(np.int64(4), np.uint8(3)), data=(np.uint64(0x30000), np.bool_(True)),
                                        version=np.int32(3))))
    assert (v.shape, v.ptr, v.readonly) == ((4, 3), 0x30000, True)


@pytest.mark.parametrize("field,value,what", [
    ("shape", (4, Index(None)), "shape"),
    ("strides", (Index(None), 4), "strides"),
    ("version", Index(None), "'version'"),
    ("stream", Index(None), "'stream'"),
])
def test_cai_index_that_raises_is_a_named_type_error(field, value, what):
    def boom():
        raise RuntimeError("index exploded")

    for v in (value if isinstance(value, tuple) else (value,)):
        if isinstance(v, Index):
            v.action = boom
    with refused(TypeError, "as_array(obj)", what, "__index__", "index exploded") as info:
        jitbridge.as_array(CAI(cai_dict(**{field: value})))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_cai_read_only_flag_whose_bool_raises():
    def boom():
        raise ValueError("no truth here")

    with refused(TypeError, "as_array(obj)", "read-only flag", "no truth here") as info:
        jitbridge.as_array(CAI(cai_dict(data=(0x10000, Flag(True, boom)))))
    assert isinstance(info.value.__cause__, ValueError)


def test_cai_property_that_raises_keeps_its_type_and_is_named():
    class Raises:
        @property
        def __cuda_array_interface__(self):
            raise ValueError("no interface today")

    with refused(ValueError, "as_array(obj)", "no interface today"):
        jitbridge.as_array(Raises())


# ---- 3. CAI field garbage ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fields,exc,why", [
    ({"data": (0x1000,)}, TypeError, "'data' must be a (pointer, read_only) tuple"),
    ({"data": (0x1000, False, 0)}, TypeError, "'data' must be a (pointer, read_only) tuple"),
    ({"data": [0x1000, False]}, TypeError, "got a list"),
    ({"data": ("0x1000", False)}, TypeError, "data pointer holds a str"),
    ({"data": (2 ** 64, False)}, OverflowError, "data pointer"),
    ({"data": (-1, False)}, ValueError, "data pointer is negative"),
    ({"version": -1}, ValueError, "version -1 is not supported"),
    ({"version": 2 ** 64}, OverflowError, "'version'"),
    ({"version": True}, TypeError, "'version' holds a bool"),
    ({"mask": 0}, BufferError, "mask"),
    ({"typestr": ""}, ValueError, "malformed"),
    ({"typestr": "<"}, ValueError, "malformed"),
    ({"typestr": "<f" + "9" * 40}, ValueError, "not a supported dtype"),  # digits only: a size, far too big
    ({"typestr": "<f4x"}, ValueError, "malformed"),
    ({"typestr": "\ud800f4"}, ValueError, "'typestr' is not valid text"),
    ({"typestr": b"<f4"}, TypeError, "'typestr' is a bytes"),
    ({"shape": (4, 2 ** 63)}, OverflowError, "shape holds 9223372036854775808"),
    ({"shape": (4, -(2 ** 63) - 1)}, OverflowError, "shape"),
    ({"shape": (-1,)}, ValueError, "negative"),
    ({"shape": (1,) * 65}, ValueError, "'shape' has more than 64 entries"),
    ({"shape": (2 ** 62, 2 ** 62)}, ValueError, ""),
    ({"shape": None}, TypeError, "'shape' is a NoneType"),
    ({"strides": (4, 2 ** 63)}, OverflowError, "strides"),
    ({"strides": (I64_MAX, 4)}, ValueError, "not a multiple"),
    ({"strides": (-(2 ** 63), 4)}, ValueError, ""),
    ({"stream": 2 ** 64}, OverflowError, "'stream'"),
    ({"stream": -5}, ValueError, "stream -5 is negative"),
    ({"stream": 1.0}, TypeError, "'stream' holds a float"),
])
def test_cai_garbage_is_refused_with_a_named_error(fields, exc, why):
    with refused(exc, "as_array(obj)", why):
        jitbridge.as_array(CAI(cai_dict(**fields)))


def test_cai_not_a_dict_and_missing_keys():
    with refused(TypeError, "as_array(obj)", "is a tuple, not a dict"):
        jitbridge.as_array(CAI(()))
    d = cai_dict()
    del d["data"]
    with refused(ValueError, "as_array(obj)", "has no 'data' key"):
        jitbridge.as_array(CAI(d))


# ---- 3. from_ptr, dtype, shape, device, stream ---------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,exc,names", [
    (dict(strides=(I64_MAX,), shape=(2,), dtype="int8"), ValueError, ("from_ptr",)),
    (dict(strides=(-(2 ** 63) + 1,), shape=(2,), dtype="int8"), ValueError, ("from_ptr",)),
    (dict(strides=(2 ** 63,), shape=(2,)), OverflowError, ("from_ptr(strides)", "64-bit")),
    (dict(strides=(0, Index(None, lambda: 1 / 0)), shape=(2, 2)), TypeError, ("from_ptr(strides)", "__index__")),
    (dict(shape=(2 ** 63,)), OverflowError, ("from_ptr(shape)", "9223372036854775808")),
    (dict(shape=2 ** 64), OverflowError, ("from_ptr(shape)",)),
    (dict(shape=(2, -1)), ValueError, ("from_ptr(shape)", "entry 1 is negative")),
    (dict(shape=-3), ValueError, ("from_ptr(shape)", "negative")),
    (dict(shape=(1,) * 65), ValueError, ("from_ptr(shape)", "64")),
    (dict(shape=itertools.count()), ValueError, ("from_ptr(shape)", "64")),
    (dict(shape=(2, 3.0)), TypeError, ("from_ptr(shape)", "holds a float")),
    (dict(shape=b"ab"), TypeError, ("from_ptr(shape)", "expected ints")),
    (dict(shape=(True, 2)), TypeError, ("from_ptr(shape)", "holds a bool")),
    (dict(shape=object()), TypeError, ("from_ptr(shape)", "expected a sequence of ints")),
    (dict(shape=(2 ** 62, 2 ** 62)), ValueError, ("from_ptr",)),
    (dict(ptr=2 ** 64), OverflowError, ("from_ptr", "ptr")),
    (dict(ptr=2 ** 64 - 4, shape=(8,), dtype="int8"), ValueError, ("from_ptr",)),
    (dict(ptr=True), TypeError, ("from_ptr", "ptr must be an int")),
    (dict(dtype="\ud800"), ValueError, ("from_ptr(dtype)", "not valid text")),
    (dict(dtype="<f" + "9" * 30), ValueError, ("from_ptr(dtype)",)),
    (dict(dtype=object()), ValueError, ("from_ptr(dtype)", "not a dtype")),
    (dict(device=2 ** 63), OverflowError, ("from_ptr(device)",)),
    (dict(device=-1), ValueError, ("from_ptr(device)", "out of range")),
    (dict(device="cuda:99999999999"), ValueError, ("from_ptr(device)",)),
    (dict(device="\ud800"), ValueError, ("from_ptr(device)", "not valid text")),
    (dict(device=(2, 2 ** 63)), OverflowError, ("from_ptr(device)",)),
    (dict(stream=2 ** 64), OverflowError, ("from_ptr(stream)",)),
    (dict(stream=-2), ValueError, ("from_ptr(stream)", "negative")),
])
def test_from_ptr_refusals_are_typed_and_named(kwargs, exc, names):
    args = {"ptr": 0x1000, "shape": (2, 3), "dtype": "float32"}
    args.update(kwargs)
    with refused(exc, *names):
        jitbridge.from_ptr(**args)


def test_from_ptr_at_the_int64_limits():
    v = jitbridge.from_ptr(0x1000, (2,), "int8", strides=(2 ** 62,))
    assert v.strides == (2 ** 62,)
    v = jitbridge.from_ptr(0x1000, (2 ** 60,), "float32", strides=(0,))  # a broadcast view
    assert v.size == 2 ** 60 and v.nbytes == 2 ** 62
    v = jitbridge.from_ptr(0x1000, (0, 3), "float64", strides=(I64_MAX, -(2 ** 63)))  # empty: nothing addressed
    assert v.size == 0 and v.nbytes == 0 and v.strides == (I64_MAX, -(2 ** 63))
    v = jitbridge.from_ptr(2 ** 64 - 16, (8,), "int8")
    assert v.ptr == 2 ** 64 - 16
    v = jitbridge.from_ptr(0x1000, (1,) * 64, "int8")
    assert v.ndim == 64


def test_from_ptr_shape_list_changed_by_an_item():
    shape = []
    shape.extend([Index(2, lambda: shape.clear()), 3])
    assert jitbridge.from_ptr(0x1000, shape, "float32").shape == (2, 3)
    strides = []
    strides.extend([Index(3, lambda: strides.extend(range(100))), 1])
    assert jitbridge.from_ptr(0x1000, (2, 3), "float32", strides=strides).strides == (3, 1)
    assert jitbridge.from_ptr(0x1000, np.int64(5), "float32").shape == (5,)


def test_dtype_objects_that_raise_are_named():
    class TorchLike:  # type(x).__module__ == "torch": read through str()
        def __str__(self):
            raise RuntimeError("no name")

    TorchLike.__module__ = "torch"
    with refused(TypeError, "from_ptr(dtype)", "str()", "no name") as info:
        jitbridge.from_ptr(0x1000, 2, TorchLike())
    assert isinstance(info.value.__cause__, RuntimeError)

    class TorchSurrogate:
        def __str__(self):
            return "torch.\ud800"

    TorchSurrogate.__module__ = "torch"
    with refused(ValueError, "from_ptr(dtype)", "not valid text"):
        jitbridge.from_ptr(0x1000, 2, TorchSurrogate())

    class NotADtype:
        def __repr__(self):
            raise RuntimeError("no repr either")

    with refused(ValueError, "from_ptr(dtype)", "not a dtype") as info:
        jitbridge.from_ptr(0x1000, 2, NotADtype())

    class WithDtype:  # numpy.dtype(x) reads x.dtype
        @property
        def dtype(self):
            raise KeyError("gone")

    with refused(ValueError, "from_ptr(dtype)", "not a dtype"):
        jitbridge.from_ptr(0x1000, 2, WithDtype())


def test_device_object_whose_str_raises():
    class Device:
        def __str__(self):
            raise RuntimeError("no device")

    with refused(TypeError, "from_ptr(device)", "no device"):
        jitbridge.from_ptr(0x1000, 2, "float32", device=Device())


def test_stream_objects_that_raise_or_lie():
    class Prop:
        @property
        def ptr(self):
            raise ValueError("stream gone")

    with refused(ValueError, "stream", "stream gone"):
        jitbridge.as_array(CAI(cai_dict()), stream=Prop())

    class LyingTuple(tuple):
        def __len__(self):
            return 2

    class Short:
        def __cuda_stream__(self):
            return LyingTuple((0,))

    with refused(TypeError, "stream", "(version, handle) tuple"):
        jitbridge.as_array(CAI(cai_dict()), stream=Short())

    class Big:
        def __cuda_stream__(self):
            return (0, 2 ** 64)

    with refused(OverflowError, "stream", "__cuda_stream__() handle"):
        jitbridge.as_array(CAI(cai_dict()), stream=Big())


@pytest.mark.parametrize("fn", ["empty", "zeros"])
def test_allocators_refuse_before_allocating(fn):
    f = getattr(jitbridge, fn)
    with refused(OverflowError, f"{fn}(shape)"):
        f((2 ** 63,), "float32")
    with refused(ValueError, f"{fn}(shape)", "64"):
        f((1,) * 65, "float32")
    with refused(ValueError, f"{fn}(dtype)", "not valid text"):
        f((2,), "\ud800")


def test_dlpack_export_arguments_at_the_limits():
    v = jitbridge.from_ptr(0x1000, (4,), "float32", device="cpu")
    with refused(OverflowError, "ArrayView.__dlpack__", "stream"):
        v.__dlpack__(stream=2 ** 64)
    with refused(OverflowError, "ArrayView.__dlpack__", "max_version[0]"):
        v.__dlpack__(max_version=(2 ** 64, 0))
    with refused(OverflowError, "ArrayView.__dlpack__", "dl_device[1]"):
        v.__dlpack__(dl_device=(1, 2 ** 70))


@pytest.mark.parametrize("cls", [jitbridge.ArrayView, jitbridge.Tensor])
def test_views_and_tensors_cannot_be_made_uninitialised(cls):
    # Cls.__new__(Cls) used to give an instance whose C++ object was never constructed: reading it crashed.
    import copy

    for make in (lambda: cls.__new__(cls), lambda: object.__new__(cls), cls):
        with refused(TypeError, cls.__name__):
            make()
    with pytest.raises(TypeError):
        cls.__dlpack__(5)  # an unbound method given another object
    if cls is jitbridge.ArrayView:
        with pytest.raises(TypeError):
            copy.copy(jitbridge.from_ptr(0x1000, 4, "int8"))


class RaisingNameMeta(type):
    """A metaclass whose __name__ raises: error messages name such types without running Python code."""

    @property
    def __name__(cls):
        raise RuntimeError("__name__ must not be read")


def test_type_name_in_errors_runs_no_python_code():
    Odd = RaisingNameMeta("Odd", (), {})
    with pytest.raises(TypeError, match=r"ptr must be an int, got a Odd"):
        jitbridge.from_ptr(Odd(), (4,), "float32", device="cuda:0")
    with pytest.raises(TypeError, match=r"options.*Odd"):
        jitbridge.compile('extern "C" __global__ void k() {}', options=[Odd()], arch="sm_90")
