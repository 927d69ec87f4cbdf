"""fuzz_dlpack.py — atheris target: jitbridge.as_array on DLPack producers whose capsules (versioned
DLManagedTensorVersioned and legacy DLManagedTensor, built here with ctypes, or by the capsule hook of the
test-only jitbridge_testing) carry fuzzed names, versions, flags, ndim, shape, strides, dtype, data, byte_offset and
device, and arrays of a synthetic framework with the DLPack C exchange API. Checked against
reference.judge_capsule, plus ownership: a consumed capsule's deleter runs exactly once, when the view goes (at once
for a refused tensor), and an unconsumed one's never."""
import ctypes
import gc
import itertools
import sys

import fuzz_common as fc
from fuzz_common import finding
import jitbridge
import jitbridge_testing as testing  # the test-only extension (python/testing)
import reference as ref
import view_facts


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Versioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


class Legacy(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


DELETES = {}  # manager_ctx token -> deleter calls


def _count(managed):
    token = TOKEN_OF.get(managed, -1)  # the struct's address says whose deleter ran
    DELETES[token] = DELETES.get(token, 0) + 1


COUNT = DELETER(_count)
TOKEN_OF = {}  # address of the managed struct -> token
TOKENS = itertools.count(1)

_new = ctypes.pythonapi.PyCapsule_New
_new.restype = ctypes.py_object
_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype = ctypes.c_char_p
_name.argtypes = [ctypes.py_object]

NAMES = ["dltensor_versioned", "dltensor", "used_dltensor_versioned", "used_dltensor", "my_tensor", ""]
DEVICES = [(2, 0), (2, 0), (1, 0), (13, 0), (2, 1), (3, 0), (10, 0), (2, -1)]


class Producer:
    """A __dlpack__ producer handing out one prepared capsule (it keeps the ctypes memory alive)."""

    def __init__(self, capsule, device, keep, style):
        self.capsule, self.device, self.keep, self.style = capsule, device, keep, style

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


class LegacyProducer(Producer):
    """A producer from before DLPack 1.0: no max_version keyword."""

    def __dlpack__(self, stream=None):
        return self.capsule


class NoDevice:
    """A producer without __dlpack_device__."""

    def __init__(self, capsule, keep):
        self.capsule, self.keep = capsule, keep

    def __dlpack__(self, stream=None, max_version=None):
        return self.capsule


def make(fdp, token):
    c = {}
    c["versioned"] = fdp.ConsumeBool()
    default_name = "dltensor_versioned" if c["versioned"] else "dltensor"
    name = default_name if fdp.ConsumeIntInRange(0, 7) else fdp.PickValueInList(NAMES)
    if name in ("dltensor_versioned", "dltensor"):
        name = default_name  # a struct of the other kind under a name would be the producer's own bug
    c["name"] = name
    c["major"] = 1 if fdp.ConsumeIntInRange(0, 7) else fdp.PickValueInList([0, 2, 2**32 - 1])
    c["flags"] = fdp.ConsumeIntInRange(0, 7) if fdp.ConsumeBool() else fdp.ConsumeIntInRange(0, 2**64 - 1)
    r = fdp.ConsumeIntInRange(0, 31)
    c["ndim"] = fdp.ConsumeIntInRange(0, 4) if r < 28 else fdp.PickValueInList([-1, -2**31, 64, 65])
    n = max(c["ndim"], 0)
    shape = [fdp.ConsumeIntInRange(0, 9) if fdp.ConsumeIntInRange(0, 7) else fc.edgy_int(fdp) for _ in range(n)]
    c["shape"] = None if n and fdp.ConsumeIntInRange(0, 31) == 0 else [int(ctypes.c_int64(x).value) for x in shape]
    if fdp.ConsumeBool():
        st = [fdp.ConsumeIntInRange(-9, 9) if fdp.ConsumeIntInRange(0, 7) else fc.edgy_int(fdp) for _ in range(n)]
        c["strides"] = [int(ctypes.c_int64(x).value) for x in st]
    else:
        c["strides"] = None
    triples = [(2, 32, 1), (2, 64, 1), (2, 16, 1), (4, 16, 1), (0, 8, 1), (1, 8, 1), (6, 8, 1), (5, 128, 1),
               (2, 32, 4), (0, 4, 1), (2, 0, 1), (2, 32, 0), (10, 8, 1), (99, 8, 1)]
    c["triple"] = fdp.PickValueInList(triples) if fdp.ConsumeIntInRange(0, 7) else \
        (fdp.ConsumeIntInRange(0, 255), fdp.ConsumeIntInRange(0, 255), fdp.ConsumeIntInRange(0, 65535))
    c["data"] = fdp.PickValueInList([0x7F0000001000, 0x10, 0]) if fdp.ConsumeBool() else \
        fc.edgy_int(fdp) % 2**64
    c["byte_offset"] = fdp.PickValueInList([0, 8, 4096]) if fdp.ConsumeBool() else fc.edgy_int(fdp) % 2**64
    c["device"] = fdp.PickValueInList(DEVICES)
    c["deleter"] = fdp.ConsumeIntInRange(0, 15) != 0
    c["producer"] = fdp.PickValueInList(["modern"] * 6 + ["legacy", "nodevice", "hook", "exchange"])
    c["token"] = token
    return c


def build_capsule(c):
    """(capsule, keep-alive list) for the spec `c`."""
    keep = []
    n = max(c["ndim"], 0)
    m = Versioned() if c["versioned"] else Legacy()
    t = m.dl_tensor
    t.data = c["data"] or None
    t.device = DLDevice(*c["device"])
    t.ndim = c["ndim"]
    t.dtype = DLDataType(*c["triple"])
    if c["shape"] is not None and n:
        arr = (ctypes.c_int64 * n)(*c["shape"])
        keep.append(arr)
        t.shape = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))
    if c["strides"] is not None and n:
        arr = (ctypes.c_int64 * n)(*c["strides"])
        keep.append(arr)
        t.strides = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))
    elif c["strides"] is not None:
        arr = (ctypes.c_int64 * 1)(0)  # ndim 0 with a non-NULL strides pointer
        keep.append(arr)
        t.strides = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = c["byte_offset"]
    if c["versioned"]:
        m.version = DLPackVersion(c["major"] % 2**32, 1)
        m.flags = c["flags"]
    m.manager_ctx = c["token"]
    if c["deleter"]:
        m.deleter = COUNT
    keep.append(m)
    address = ctypes.addressof(m)
    TOKEN_OF[address] = c["token"]
    name = c["name"].encode()
    keep.append(name)
    return _new(address, name, None), keep


def test_one(data):
    fdp = fc.atheris.FuzzedDataProvider(data)
    token = next(TOKENS)
    c = make(fdp, token)
    context = f"as_array(DLPack {c!r})"
    if c["producer"] == "hook":
        hook_case(fdp, c)
        return
    if c["producer"] == "exchange":
        exchange_case(fdp, c)
        return
    capsule, keep = build_capsule(c)
    if c["producer"] == "legacy":
        obj = LegacyProducer(capsule, c["device"], keep, "legacy")
    elif c["producer"] == "nodevice":
        obj = NoDevice(capsule, keep)
    else:
        obj = Producer(capsule, c["device"], keep, "modern")
    outcome = ref.judge_capsule(c)
    v = fc.check(lambda: jitbridge.as_array(obj), [outcome], context, view_facts.differences)
    taken = _name(capsule) in (b"used_dltensor_versioned", b"used_dltensor") and \
        c["name"] in ("dltensor_versioned", "dltensor")
    want = 1 if taken and c["deleter"] else 0
    if v is not None:
        if DELETES.get(token, 0) != 0:
            finding("lifetime", f"the deleter ran while the view was alive | {context}")
        view_facts.round_trips(v, context)
        del v
        gc.collect(0)
    if DELETES.get(token, 0) != want:
        finding("lifetime", f"the deleter ran {DELETES.get(token, 0)} times (expected {want}; the capsule is now "
                            f"named {_name(capsule)!r}) | {context}")
    del obj, capsule
    DELETES.pop(token, None)
    for k in [k for k, t in TOKEN_OF.items() if t == token]:
        del TOKEN_OF[k]


def hook_case(fdp, c):
    """jitbridge's own synthetic capsules (jitbridge_testing.capsule): real host memory behind them, so byte_offset is
    small."""
    kind = fdp.PickValueInList(["versioned", "legacy", "used", "used_legacy", "foreign"])
    shape = tuple(x for x in (c["shape"] or []) if 0 <= x < 64)
    strides = tuple(c["strides"][:len(shape)]) if c["strides"] is not None and len(c["strides"]) >= len(shape) else None
    dtype = fdp.PickValueInList(["float32", "int8", "float64", "bfloat16", "complex128", "bool"])
    device = fdp.PickValueInList([None, "cpu", "cuda:0", (2, 1)])
    byte_offset = fdp.ConsumeIntInRange(0, 64)
    readonly = fdp.ConsumeBool()
    major = 1 if fdp.ConsumeIntInRange(0, 7) else 2
    data_null = fdp.ConsumeIntInRange(0, 15) == 0
    before = testing.deleter_count()
    capsule, address = testing.capsule(kind, shape, strides, dtype, device, None, data_null, major, readonly,
                                       byte_offset)
    spec = dict(name={"versioned": "dltensor_versioned", "legacy": "dltensor", "used": "used_dltensor_versioned",
                      "used_legacy": "used_dltensor", "foreign": "my_tensor"}[kind],
                versioned=kind in ("versioned", "used", "foreign"), major=major, flags=int(readonly),
                ndim=len(shape), shape=list(shape), strides=list(strides) if strides is not None else None,
                triple=ref.DTYPES[dtype], data=0 if data_null else address - byte_offset, byte_offset=byte_offset,
                device=(2, 1) if device == (2, 1) else (2, 0) if device == "cuda:0" else (1, 0))
    context = f"as_array(testing.capsule {spec!r})"
    obj = Producer(capsule, spec["device"], None, "hook")
    v = fc.check(lambda: jitbridge.as_array(obj), [ref.judge_capsule(spec)], context, view_facts.differences)
    taken = spec["name"] in ("dltensor_versioned", "dltensor")
    if v is not None:
        if testing.deleter_count() != before:
            finding("lifetime", f"the deleter ran while the view was alive | {context}")
        del v
        gc.collect(0)
    after = testing.deleter_count()
    if taken and after != before + 1:
        finding("lifetime", f"{after - before} deletes after the view went (expected 1) | {context}")
    del obj, capsule  # an untaken capsule deletes its tensor itself


class Exchange:
    """An array of a synthetic framework with the DLPack C exchange API (jitbridge_testing.exchange_api): its DLTensor
    is made from these attributes by C code, borrowed (dltensor_from_py_object_no_sync)."""

    def __init__(self, ptr, shape, dtype, device, strides):
        self._ptr, self._shape, self._dtype, self._device, self._strides = ptr, shape, dtype, device, strides


class ExchangeManaged(Exchange):
    """The same framework without dltensor_from_py_object_no_sync: a managed tensor per view, deleted once."""


Exchange.__dlpack_c_exchange_api__ = testing.exchange_api(dltensor=True, stream=0, factory=Exchange)
ExchangeManaged.__dlpack_c_exchange_api__ = testing.exchange_api(dltensor=False, stream=0, factory=Exchange)


def exchange_case(fdp, c):
    name = ref.dtype_name(c["triple"])
    if name is None or c["triple"][2] != 1:
        name, c["triple"] = "float32", ref.DTYPES["float32"]
    c["shape"] = (c["shape"] or [])[:64]  # the framework always has a shape (at most 64 dimensions)
    c["ndim"] = len(c["shape"])
    if c["strides"] is not None:
        c["strides"] = (c["strides"] + [1] * c["ndim"])[:c["ndim"]]
    c.update(name="dltensor_versioned", versioned=True, major=1, flags=0, byte_offset=0,
             device=fdp.PickValueInList([(2, 0), (1, 0), (2, 1)]))
    managed = fdp.ConsumeBool()
    cls = ExchangeManaged if managed else Exchange
    obj = cls(c["data"], list(c["shape"]), name, c["device"], None if c["strides"] is None else list(c["strides"]))
    context = f"as_array(exchange API, {'managed' if managed else 'dltensor'}, {c!r})"
    before = testing.deleter_count()
    # An explicit stream: without one, the framework's stream is looked up through a managed tensor of its own
    # (made and deleted to learn the device), which would blur the count of the view's tensor.
    v = fc.check(lambda: jitbridge.as_array(obj, stream=1), [ref.judge_capsule(c)], context, view_facts.differences)
    if v is not None:
        if testing.deleter_count() != before:
            finding("lifetime", f"the deleter ran while the view was alive | {context}")
        view_facts.round_trips(v, context)
        del v
        gc.collect(0)
    want = before + (1 if managed else 0)
    if testing.deleter_count() != want:
        finding("lifetime", f"{testing.deleter_count() - before} deletes after the view went (expected "
                            f"{want - before}) | {context}")


if __name__ == "__main__":
    fc.run(test_one, sys.argv)
