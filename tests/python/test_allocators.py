"""Allocators for jitbridge's own Tensors without a GPU (issue 28): the allocate/deallocate protocol per call
(allocator=), per thread scope (using_allocator) and process-wide (set_allocator); what allocate may return and the
errors for what it may not; deallocate raising; objects dropped in any order; the C interface's alloc_async /
free_async called without the GIL; the CuPy / RMM / torch adapters against stand-in modules.

Children run on the fake driver of tests/fuzz/fake_cuda. The recording allocator takes real (fake) device memory
through the driver's cuMemAllocAsync, so fake_cuda_live_allocations() says whether anything leaked."""
import sys
from pathlib import Path

import pytest

import jitbridge
from fake_driver import run_json_child

PRELUDE = r'''
TESTS_DIR = @TESTS_DIR@
import ctypes, gc, json, sys, threading, warnings
import numpy as np
import jitbridge as jb

FAKE = ctypes.CDLL("libcuda.so.1")
FAKE.fake_cuda_live_allocations.restype = ctypes.c_long
FAKE.fake_cuda_stream_create.restype = ctypes.c_size_t


def driver_fn(name, *args):
    fn = ctypes.c_void_p()
    assert FAKE.cuGetProcAddress_v2(name.encode(), ctypes.byref(fn), 13000, 0, None) == 0, name
    return ctypes.CFUNCTYPE(ctypes.c_int, *args)(fn.value)


mem_alloc = driver_fn("cuMemAllocAsync", ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_void_p)
mem_free = driver_fn("cuMemFreeAsync", ctypes.c_uint64, ctypes.c_void_p)


class Recording:
    """Real fake-driver memory; records every call as (what, size, stream) / (what, ptr, size, stream)."""

    def __init__(self):
        self.calls = []

    def allocate(self, size, stream):
        p = ctypes.c_uint64()
        assert mem_alloc(ctypes.byref(p), size, stream) == 0
        self.calls.append(["allocate", size, stream, p.value])
        return p.value

    def deallocate(self, ptr, size, stream):
        self.calls.append(["deallocate", ptr, size, stream])
        assert mem_free(ptr, stream) == 0


def live():
    return FAKE.fake_cuda_live_allocations()


out = {}
'''


def child(code, devices=1):
    return run_json_child(PRELUDE.replace("@TESTS_DIR@", repr(str(Path(__file__).resolve().parent))) + code,
                          devices=devices)


def test_per_call_allocator_gets_the_stream_and_frees_on_the_allocation_stream_after_hand_offs():
    r = child(r'''
a = Recording()
s1, s2 = FAKE.fake_cuda_stream_create(), FAKE.fake_cuda_stream_create()
base = live()
t = jb.empty((4, 5), "float32", stream=s1, allocator=a)
out["ptr_matches"] = t.ptr == a.calls[0][3]
out["after_alloc"] = live() - base
cap = t.__dlpack__(stream=s2)          # handed to s2: the free waits for it, and is still ordered on s1
out["tensor_stream"] = t.stream
del t
out["before_capsule_goes"] = len(a.calls)
del cap
gc.collect()
out["calls"] = a.calls
out["after_free"] = live() - base
out["s1"], out["s2"] = s1, s2
z = jb.zeros(3, "int8", allocator=a)    # legacy stream: 1
out["zeros_stream"] = a.calls[-1][2]
del z
out["empty_size_calls"] = len(a.calls)
e = jb.empty((0, 7), "float64", allocator=a)   # nothing to allocate: the allocator is not called
out["empty_size_calls_after"] = len(a.calls)
print(json.dumps(out))
''')
    s1, s2 = r["s1"], r["s2"]
    assert r["ptr_matches"] and r["after_alloc"] == 1
    assert r["before_capsule_goes"] == 1             # the capsule still owns the memory
    (alloc, size, stream, ptr), (free, fptr, fsize, fstream) = r["calls"][:2]
    assert (alloc, size, stream) == ("allocate", 80, s1)
    assert (free, fptr, fsize, fstream) == ("deallocate", ptr, 80, s1)   # the allocation stream
    assert r["tensor_stream"] == s2
    assert r["after_free"] == 0
    assert r["zeros_stream"] == 1
    assert r["empty_size_calls"] == r["empty_size_calls_after"]


def test_scopes_nest_restore_on_exceptions_and_are_per_thread_over_the_global_allocator():
    r = child(r'''
g, s, other = Recording(), Recording(), Recording()
base = live()
out["previous"] = jb.set_allocator(g) is None
out["get_global"] = jb.get_allocator() is g
t1 = jb.empty(8, "float32")
with jb.using_allocator(s) as entered:
    out["entered"] = entered is s
    t2 = jb.empty_like(t1)
    with jb.using_allocator(None):                 # jitbridge's own pool inside
        before = live()
        t3 = jb.empty(8, "float32")
        out["own_pool"] = live() - before
        out["inner_get"] = jb.get_allocator() is None
    seen = {}

    def worker():                                   # no scope on this thread: the process-wide one
        seen["get"] = jb.get_allocator() is g
        with jb.using_allocator(other):
            seen["t"] = jb.empty(2, "float32")
        seen["after"] = jb.get_allocator() is g

    th = threading.Thread(target=worker)
    th.start()
    th.join()
    out["thread_get"], out["thread_after"] = seen["get"], seen["after"]
    del seen
    try:
        with jb.using_allocator(other):
            raise KeyError("boom")
    except KeyError:
        pass
    out["restored_after_raise"] = jb.get_allocator() is s
    h = jb.asarray(np.arange(6, dtype=np.float32))  # uploads come from the scope too
out["restored"] = jb.get_allocator() is g
out["counts"] = [sum(c[0] == "allocate" for c in x.calls) for x in (g, s, other)]
out["previous_back"] = jb.set_allocator(None) is g
del t1, t2, t3, h
gc.collect()
out["frees"] = [sum(c[0] == "deallocate" for c in x.calls) for x in (g, s, other)]
out["leaked"] = live() - base
print(json.dumps(out))
''')
    assert r["previous"] and r["get_global"] and r["entered"]
    assert r["own_pool"] == 1 and r["inner_get"]
    assert r["thread_get"] and r["thread_after"]
    assert r["restored_after_raise"] and r["restored"] and r["previous_back"]
    assert r["counts"] == [1, 2, 1]     # t1 | t2, the upload | the thread's tensor
    assert r["frees"] == [1, 2, 1]
    assert r["leaked"] == 0


def test_allocate_returning_garbage_is_refused_naming_the_argument_and_what_it_can_hand_back_goes_back():
    r = child(r'''
class Scripted:
    """allocate returns what the test says; deallocate records."""
    def __init__(self, result):
        self.result, self.freed = result, []
    def allocate(self, size, stream):
        return self.result(size) if callable(self.result) else self.result
    def deallocate(self, ptr, size, stream):
        self.freed.append([ptr, size])

class Buf:
    def __init__(self, ptr, size=None, attr="ptr"):
        setattr(self, attr, ptr)
        if size is not None:
            self.size = size

cases = {
    "none": Scripted(None), "str": Scripted("0x1000"), "float": Scripted(4096.0), "bool": Scripted(True),
    "negative": Scripted(-4096), "huge": Scripted(1 << 70), "null": Scripted(0),
    "misaligned": Scripted(0x7f0000000008), "wraps": Scripted((1 << 64) - 256),
    "small_buffer": Scripted(lambda n: Buf(0x7f0000001000, n - 1)),
    "bad_ptr_attr": Scripted(Buf("x")),
}
errors = {}
for name, alloc in cases.items():
    try:
        jb.empty(1000, "uint8", allocator=alloc)
        errors[name] = None
    except Exception as e:
        errors[name] = [type(e).__name__, str(e), alloc.freed]
out["errors"] = errors

class Raising:
    def allocate(self, size, stream):
        raise MemoryError("pool exhausted")
    def deallocate(self, ptr, size, stream):
        pass
try:
    jb.zeros(10, "float32", allocator=Raising())
except MemoryError as e:
    out["raised"] = str(e)
try:
    jb.asarray(np.zeros(10, np.float32), allocator=Raising())   # the upload allocates with the GIL held
except MemoryError as e:
    out["raised_upload"] = str(e)
try:
    jb.asarray(np.zeros(10, np.float32), allocator=cases["misaligned"])
except ValueError as e:
    out["upload_garbage"] = str(e)

jb.set_allocator(cases["none"])
try:
    jb.empty(10, "float32")
except TypeError as e:
    out["global_label"] = str(e)
with jb.using_allocator(cases["null"]):
    try:
        jb.empty(10, "float32")
    except ValueError as e:
        out["scope_label"] = str(e)
jb.set_allocator(None)

class OtherDevice(Recording):
    device_id = 1
try:
    jb.empty(10, "float32", allocator=OtherDevice())
except ValueError as e:
    out["device_id"] = str(e)

ok = Scripted(lambda n: Buf(0x7f0000002000, n, attr="handle"))   # cuda.core's Buffer: .handle and .size
t = jb.empty(16, "float32", allocator=ok)
out["handle_ptr"] = t.ptr
del t
out["handle_freed"] = ok.freed

not_allocators = {}
for call in ("empty", "zeros", "empty_like", "asarray", "set_allocator", "using_allocator"):
    try:
        if call == "empty":
            jb.empty(4, "float32", allocator=object())
        elif call == "zeros":
            jb.zeros(4, "float32", allocator=3)
        elif call == "empty_like":
            jb.empty_like(jb.empty(4, "float32"), allocator="cupy")
        elif call == "asarray":
            jb.asarray(np.zeros(3), allocator=lambda n, s: 0)
        elif call == "set_allocator":
            jb.set_allocator(Recording)       # the class: its methods are unbound, still callable; refused? no
        else:
            with jb.using_allocator(5):
                pass
        not_allocators[call] = None
    except TypeError as e:
        not_allocators[call] = str(e)
jb.set_allocator(None)
out["not_allocators"] = not_allocators
print(json.dumps(out))
''')
    e = r["errors"]
    for name in ("none", "str", "float", "bool", "bad_ptr_attr"):
        assert e[name][0] == "TypeError", (name, e[name])
        assert e[name][1].startswith("empty(allocator): "), e[name]
        assert e[name][2] == []                               # no address to give back
    for name in ("negative", "huge"):
        assert e[name][0] == "ValueError" and "not a device address" in e[name][1], e[name]
    assert e["null"][0] == "ValueError" and "null address" in e["null"][1] and e["null"][2] == []
    assert "not aligned to 256 bytes" in e["misaligned"][1]
    assert e["misaligned"][2] == [[0x7f0000000008, 1000], [0x7f0000000008, 40]]   # and the upload's below
    assert "wrap around" in e["wraps"][1] and e["wraps"][2] == [[(1 << 64) - 256, 1000]]
    assert "a buffer of 999 bytes" in e["small_buffer"][1] and e["small_buffer"][2] == [[0x7f0000001000, 1000]]
    assert r["raised"] == r["raised_upload"] == "pool exhausted"
    assert r["upload_garbage"].startswith("asarray(allocator): Scripted.allocate(40, 1) returned address")
    assert r["global_label"].startswith(
        "allocator (the one set_allocator() set): Scripted.allocate(40, 1) returned a NoneType")
    assert r["scope_label"].startswith(
        "allocator (using_allocator()'s): Scripted.allocate(40, 1) returned a null address")
    assert "serves device 1" in r["device_id"] and "cuda:0" in r["device_id"]
    assert r["handle_ptr"] == 0x7f0000002000 and r["handle_freed"] == [[0x7f0000002000, 64]]
    n = r["not_allocators"]
    for call in ("empty", "zeros", "empty_like", "asarray", "using_allocator"):
        assert n[call] and f"{call}(allocator)" in n[call] and "is no allocator" in n[call], (call, n[call])
    assert n["set_allocator"] is None       # a class has callable allocate/deallocate: accepted as the protocol says


def test_deallocate_raising_warns_and_never_crashes_and_objects_go_in_any_order():
    r = child(r'''
class Failing(Recording):
    def deallocate(self, ptr, size, stream):
        super().deallocate(ptr, size, stream)
        raise RuntimeError("cannot free")

base = live()
f = Failing()
t = jb.empty(32, "float32", allocator=f)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    del t
out["warnings"] = [str(x.message) for x in w]
out["categories"] = [x.category.__name__ for x in w]

# warnings as errors: reported as unraisable, never raised into the code that dropped the tensor
hooked = []
sys.unraisablehook = lambda u: hooked.append(type(u.exc_value).__name__)
t = jb.empty(32, "float32", allocator=f)
with warnings.catch_warnings():
    warnings.simplefilter("error")
    del t
out["unraisable"] = hooked

# the allocator dropped before its tensors (it stays alive as long as they do), scope left before them
a = Recording()
with jb.using_allocator(a):
    t1, t2 = jb.empty(4, "float32"), jb.empty(8, "float32")
jb.set_allocator(a)
jb.set_allocator(None)
calls = a.calls
del a
del t2
gc.collect()
del t1
out["order_calls"] = [c[0] for c in calls]
out["leaked"] = live() - base
# a thread that ends inside a scope (never left): its scope goes with the thread, without the GIL there
def leaky():
    token = jb._core._enter_allocator_scope(Recording())
    leaky.tensor = jb.empty(4, "float32")     # outlives the thread and its scope
th = threading.Thread(target=leaky)
th.start()
th.join()
del leaky.tensor
gc.collect()
out["main_after_thread"] = jb.get_allocator() is None
# a tensor from a Python allocator still alive at exit: the process ends without a crash
keep = jb.empty(4, "float32", allocator=Recording())
print(json.dumps(out))
''')
    assert r["categories"] == ["RuntimeWarning"]
    assert "deallocate(" in r["warnings"][0] and "cannot free" in r["warnings"][0]
    assert r["unraisable"] == ["RuntimeWarning"]
    assert r["order_calls"] == ["allocate", "allocate", "deallocate", "deallocate"]
    assert r["leaked"] == 0
    assert r["main_after_thread"]


def test_c_interface_alloc_async_uses_the_process_wide_allocator_without_the_gil():
    r = child(r'''
sys.path.insert(0, TESTS_DIR)
import c_api_ctypes as C
t = C.table()
out["version"] = [t.major, t.minor]
a = Recording()
base = live()
p = ctypes.c_uint64()
rc = t.alloc_async(0, 1000, None, ctypes.byref(p))   # CFUNCTYPE: the GIL is released around the call
out["builtin"] = [rc, live() - base]
out["builtin_free"] = t.free_async(0, p.value, None)
jb.set_allocator(a)
rc = t.alloc_async(0, 1000, None, ctypes.byref(p))
out["python"] = [rc, p.value == a.calls[0][3], a.calls[0][1]]
rc = t.free_async(0, p.value, None)               # no GIL: deallocate is queued for the main thread
for _ in range(1000):                              # pending calls run between bytecodes
    if len(a.calls) == 2:
        break
out["freed"] = [rc, a.calls[-1][:3] if len(a.calls) == 2 else None, p.value == a.calls[-1][1]]
out["double_free"] = [t.free_async(0, p.value, None), C.message(t)]

class Raising(Recording):
    def allocate(self, size, stream):
        raise MemoryError("no room")
jb.set_allocator(Raising())
rc = t.alloc_async(0, 64, None, ctypes.byref(p))
out["raising"] = [rc, C.message(t)]
jb.set_allocator(None)
out["leaked"] = live() - base
print(json.dumps(out))
''')
    assert r["version"] == [1, 1]
    assert r["builtin"] == [0, 1] and r["builtin_free"] == 0
    assert r["python"] == [0, True, 1000]
    assert r["freed"][0] == 0 and r["freed"][1] == ["deallocate", r["freed"][1][1], 1000] and r["freed"][2]
    assert r["double_free"][0] == 3 and "not from alloc_async" in r["double_free"][1]
    assert r["raising"][0] == 12 and "MemoryError" in r["raising"][1] and "no room" in r["raising"][1]
    assert r["leaked"] == 0


def test_scope_left_on_another_thread_or_twice_is_refused():
    r = child(r'''
cm = jb.using_allocator(Recording())
cm.__enter__()
err = {}
def leave():
    try:
        cm.__exit__(None, None, None)
    except RuntimeError as e:
        err["other_thread"] = str(e)
th = threading.Thread(target=leave)
th.start(); th.join()
token = jb._core._enter_allocator_scope(None)
jb._core._exit_allocator_scope(token)
try:
    jb._core._exit_allocator_scope(token)
except RuntimeError as e:
    err["twice"] = str(e)
out.update(err)
print(json.dumps(out))
''')
    assert "another thread" in r["other_thread"]
    assert "left already" in r["twice"]


def test_allocator_with_a_framework_allocating_is_refused():
    r = child(r'''
import types
cupy = types.ModuleType("cupy")
class ndarray:
    shape, dtype = (3,), np.dtype("float32")
cupy.ndarray = ndarray
sys.modules["cupy"] = cupy
errs = []
for f in (lambda: jb.empty(3, "float32", like=ndarray(), allocator=Recording()),
          lambda: jb.empty_like(ndarray(), allocator=Recording())):
    try:
        f()
    except TypeError as e:
        errs.append(str(e))
out["errors"] = errs
print(json.dumps(out))
''')
    assert len(r["errors"]) == 2
    assert r["errors"][0].startswith("empty(allocator): CuPy allocates")
    assert r["errors"][1].startswith("empty_like(allocator): CuPy allocates")


ADAPTERS = r'''
import types
calls = []

# --- CuPy: cupy.cuda.alloc under Device and (for another stream) ExternalStream
class MemoryPointer:
    def __init__(self, size):
        self.ptr, self.size = 0x7f0000100000, size
    def __del__(self):
        calls.append(["cupy free", self.ptr])
class Ctx:
    def __init__(self, what, value):
        self.what, self.value = what, value
    def __enter__(self):
        calls.append([self.what, self.value])
    def __exit__(self, *e):
        pass
class CurrentStream:
    ptr = 0
cupy = types.ModuleType("cupy")
cupy.cuda = types.SimpleNamespace(
    Device=lambda d: Ctx("cupy device", d), ExternalStream=lambda h: Ctx("cupy stream", h),
    get_current_stream=lambda: CurrentStream(), alloc=lambda n: (calls.append(["cupy alloc", n]), MemoryPointer(n))[1])

# --- torch: caching_allocator_alloc / _delete
torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(
    caching_allocator_alloc=lambda n, d, s: (calls.append(["torch alloc", n, d, s]), 0x7f0000200000)[1],
    caching_allocator_delete=lambda p: calls.append(["torch delete", p]))

# --- RMM: DeviceBuffer(size=, stream=) with a Stream made from __cuda_stream__
class RmmStream:
    def __init__(self, obj):
        self.handle = obj.__cuda_stream__()[1]
class DeviceBuffer:
    def __init__(self, size, stream, mr=None):
        calls.append(["rmm alloc", size, stream if isinstance(stream, str) else stream.handle, mr])
        self.ptr, self.size = 0x7f0000300000, size
    def __del__(self):
        calls.append(["rmm free", self.ptr])
rmm = types.ModuleType("rmm")
rmm.DeviceBuffer = DeviceBuffer
rmm_streams = types.ModuleType("rmm.pylibrmm.stream")
rmm_streams.Stream, rmm_streams.DEFAULT_STREAM = RmmStream, "rmm default stream"
imported_with_jitbridge = sorted(m for m in ("cupy", "torch", "rmm") if m in sys.modules)
sys.modules.update({"cupy": cupy, "torch": torch, "rmm": rmm, "rmm.pylibrmm": types.ModuleType("rmm.pylibrmm"),
                    "rmm.pylibrmm.stream": rmm_streams})
from jitbridge.allocators import CupyAllocator, RmmAllocator, TorchAllocator

s = FAKE.fake_cuda_stream_create()
for name, alloc in (("cupy", CupyAllocator()), ("torch", TorchAllocator()), ("rmm", RmmAllocator()),
                    ("rmm_mr", RmmAllocator(mr="my mr"))):
    calls.clear()
    t = jb.empty(10, "float32", allocator=alloc)          # legacy stream
    u = jb.empty(4, "int8", stream=s, allocator=alloc)    # another stream
    ptrs = [t.ptr, u.ptr]
    del t, u
    gc.collect()
    out[name] = [calls[:], ptrs]
out["imported_with_jitbridge"] = imported_with_jitbridge
print(json.dumps(out))
'''


def test_adapters_call_their_framework_lazily_with_the_device_size_and_stream():
    r = child(ADAPTERS)
    assert r["imported_with_jitbridge"] == []      # import jitbridge imports none of them
    calls, ptrs = r["cupy"]
    assert ptrs == [0x7f0000100000] * 2
    assert calls[:2] == [["cupy device", 0], ["cupy alloc", 40]]          # CuPy's own stream: no ExternalStream
    assert calls[2] == ["cupy device", 0] and calls[3][0] == "cupy stream" and calls[4] == ["cupy alloc", 4]
    assert sum(c[0] == "cupy free" for c in calls) == 2                    # the MemoryPointers went
    calls, ptrs = r["torch"]
    s = calls[1][3]
    assert calls == [["torch alloc", 40, 0, 0], ["torch alloc", 4, 0, s],
                     ["torch delete", 0x7f0000200000], ["torch delete", 0x7f0000200000]]
    assert s not in (0, 1)
    calls, ptrs = r["rmm"]
    assert calls[:2] == [["rmm alloc", 40, "rmm default stream", None], ["rmm alloc", 4, s, None]]
    assert sum(c[0] == "rmm free" for c in calls) == 2
    assert r["rmm_mr"][0][0] == ["rmm alloc", 40, "rmm default stream", "my mr"]


def test_adapter_without_its_framework_raises_importerror_naming_it():
    r = child(r'''
sys.modules["cupy"] = None        # not importable
from jitbridge.allocators import CupyAllocator
try:
    jb.empty(4, "float32", allocator=CupyAllocator())
except ImportError as e:
    out["error"] = str(e)
out["leaked"] = live()
print(json.dumps(out))
''')
    assert "needs cupy" in r["error"]
    assert r["leaked"] == 0


def test_module_level_names_and_signatures():
    import inspect
    for f in (jitbridge.empty, jitbridge.zeros, jitbridge.empty_like, jitbridge.asarray):
        p = inspect.signature(f).parameters["allocator"]
        assert p.kind is p.KEYWORD_ONLY and str(p.default) == "None", f
    assert jitbridge.get_allocator() is None
    assert jitbridge.allocators.set_allocator is jitbridge.set_allocator
    with pytest.raises(TypeError, match=r"set_allocator\(allocator\): a int is no allocator"):
        jitbridge.set_allocator(5)
