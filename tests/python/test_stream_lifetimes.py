"""Stream lifetimes on the fake driver (issue 23): a stream jitbridge stores is kept alive by its owner.

Each test runs a child Python on the fake driver (fake_driver.py), whose streams are destroyed when their Python
object goes and whose every call on a destroyed stream aborts the process: before the fix, dropping a stream that a
Tensor, a view or a timer remembered crashed the child at the next use or at the free. Weak references check that
the stream object lives exactly as long as the objects that stored it, and the fake driver's counters that every
allocation is freed. The GPU counterpart, with CuPy and torch streams, is test_stream_lifetimes_gpu.py."""
import pytest

from fake_driver import run_child

KERNEL = r'''
k = jb.RawKernel(r"""
extern "C" __global__ void fill(float* y, int n) {}""", "fill", arch="sm_90")
'''


def check(code, extra_env=None):
    out = run_child(code, extra_env=extra_env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_the_fake_driver_aborts_on_a_destroyed_stream_an_unowned_int_handle_shows_it():
    # The documented rule for raw ints: the stream must outlive the tensor. Broken here on purpose, to show
    # that the fake driver catches a stored handle whose stream is gone (the same crash the fix prevents).
    out = run_child('''
s = FakeStream()
t = jb.empty(16, "float32", stream=s.handle)   # an int: unowned
del s                                           # the stream is destroyed
del t                                           # the free is queued on it
''')
    assert out.returncode != 0 and "used the destroyed stream" in out.stderr, out.stdout + out.stderr


def test_counting_mode_reports_instead_of_aborting():
    out = check('''
s = FakeStream()
t = jb.empty(16, "float32", stream=s.handle)
del s, t
print(FAKE.fake_cuda_stale_stream_uses(), FAKE.fake_cuda_live_allocations())
''', {"FAKE_CUDA_STALE_STREAMS": "count"})
    # The free failed on the dead stream: jitbridge retried it on the legacy stream after a context sync.
    assert out.split() == ["1", "0"]


def test_an_allocation_stream_object_lives_as_long_as_the_tensor():
    out = check('''
s = FakeStream(); w = weakref.ref(s)
t = jb.empty(16, "float32", stream=s)
z = jb.zeros((4, 4), "float32", stream=s)
del s; gc.collect()
print(w() is not None, FAKE.fake_cuda_live_allocations())
del t; gc.collect()
print(w() is not None)
del z; gc.collect()
print(w() is None, FAKE.fake_cuda_live_allocations(), FAKE.fake_cuda_live_streams())
''')
    assert out.split() == ["True", "2", "True", "True", "0", "0"]


def test_a_stream_the_tensor_was_handed_to_by_a_launch_lives_until_the_free():
    out = check(KERNEL + '''
t = jb.empty(16, "float32")                  # the legacy stream
s = FakeStream(); w = weakref.ref(s)
k(1, 16, (t, 16), stream=s)                  # handed to s: the free must wait for s
assert t.stream == s.handle
del s; gc.collect()
print(w() is not None)
del t; gc.collect()
print(w() is None, FAKE.fake_cuda_live_allocations(), FAKE.fake_cuda_live_streams())
''')
    assert out.split() == ["True", "True", "0", "0"]


def test_the_same_stream_launch_stores_nothing():
    out = check(KERNEL + '''
s = FakeStream(); w = weakref.ref(s)
t = jb.empty(16, "float32", stream=s)
r = sys.getrefcount(s)
for _ in range(100):
    k(1, 16, (t, 16), stream=s)              # same stream: no hand-off, no new reference
print(sys.getrefcount(s) == r)
del t, s; gc.collect()
print(w() is None, FAKE.fake_cuda_live_allocations())
''')
    assert out.split() == ["True", "True", "0"]


def test_empty_like_a_tensor_takes_its_stream_with_its_owner():
    out = check('''
s = FakeStream(); w = weakref.ref(s)
x = jb.empty(16, "float32", stream=s)
del s
y = jb.empty_like(x)                         # x's stream, kept by y too
del x; gc.collect()
print(w() is not None, y.stream != 1)
del y; gc.collect()
print(w() is None, FAKE.fake_cuda_live_allocations())
''')
    assert out.split() == ["True", "True", "True", "0"]


def test_a_view_keeps_the_stream_it_was_made_for():
    out = check(KERNEL + '''
s = FakeStream(); w = weakref.ref(s)
t = jb.empty(16, "float32")
v = jb.as_array(t, stream=s)                 # made for s; later uses on other streams wait for s
p = jb.from_ptr(t.ptr, (16,), "float32", owner=t, stream=FakeStream())
del s, t; gc.collect()
print(w() is not None)
k(1, 16, (v, 16))                            # the legacy stream waits for s (an event recorded on s)
k(1, 16, (p, 16))
cap = v.__dlpack__(stream=1)                 # the same wait
del v, p; gc.collect()
print(w() is not None)                       # the capsule holds the view
del cap; gc.collect()
print(w() is None, FAKE.fake_cuda_live_allocations(), FAKE.fake_cuda_live_streams())
''')
    assert out.split() == ["True", "True", "True", "0", "0"]


def test_dlpack_capsules_keep_the_tensor_and_its_streams():
    out = check('''
s = FakeStream(); w = weakref.ref(s)
t = jb.empty(16, "float32", stream=s)
caps = [t.__dlpack__(stream=1), t.__dlpack__(stream=2, max_version=(1, 0)), t.__dlpack__(stream=-1)]
del s, t; gc.collect()
print(w() is not None, FAKE.fake_cuda_live_allocations())
caps.pop(); caps.pop(); gc.collect()
print(w() is not None)
caps.clear(); gc.collect()
print(w() is None, FAKE.fake_cuda_live_allocations())
''')
    assert out.split() == ["True", "1", "True", "True", "0"]


def test_an_event_timer_keeps_its_stream():
    out = check('''
from jitbridge import _core
s = FakeStream(); w = weakref.ref(s)
timer = _core._EventTimer(stream=s)
del s; gc.collect()
timer.start(); timer.stop()
print(w() is not None)
del timer; gc.collect()
print(w() is None)
''')
    assert out.split() == ["True", "True"]


def test_references_released_on_threads_without_the_gil_are_queued_and_released():
    # A capsule's deleter run from a thread that does not hold the GIL (a framework freeing on its own thread)
    # releases the view, and so the stream object, through the pending-call queue: never a crash or a deadlock.
    out = check('''
import threading
import jitbridge_testing as hooks
s = FakeStream(); w = weakref.ref(s)
t = jb.empty(16, "float32", stream=s)
cap = t.__dlpack__(stream=1)
del s, t
th = threading.Thread(target=hooks.delete_capsule_without_gil, args=(cap,))
th.start(); th.join(60)
assert not th.is_alive()
del cap
for _ in range(100):
    if w() is None: break
    sum(range(1000))                          # the main thread runs pending calls between bytecodes
gc.collect()
print(w() is None, FAKE.fake_cuda_live_allocations())
''')
    assert out.split() == ["True", "0"]


FAKE_CUPY = r'''
import types


class CupyStream:   # what jitbridge reads of cupy.cuda.Stream: .ptr; destroyed with the object
    def __init__(self, null=False):
        self.inner = None if null else FakeStream()
        self.ptr = 0 if null else self.inner.handle


current = [CupyStream(null=True)]
cupy = types.ModuleType("cupy")
cupy.cuda = types.SimpleNamespace(get_current_stream=lambda device_id=-1: current[0])
sys.modules["cupy"] = cupy   # as if imported: jitbridge looks up cupy.cuda.get_current_stream (never imports it)
'''


def test_an_int_that_is_cupys_current_stream_keeps_that_stream_object():
    # empty(stream=<int>) and a DLPack consumer's __dlpack__(stream=<int>) (cupy.from_dlpack passes its current
    # stream's int): the int is CuPy's current stream, whose object jitbridge keeps; another int is not kept.
    out = check(FAKE_CUPY + '''
s = CupyStream(); w = weakref.ref(s)
current[0] = s                               # `with s:`
t = jb.empty(16, "float32", stream=s.ptr)
current[0] = CupyStream(null=True)           # the `with` ends
del s; gc.collect()
print(w() is not None)
del t; gc.collect()
print(w() is None)

t = jb.empty(16, "float32")
s = CupyStream(); w = weakref.ref(s)
current[0] = s
cap = t.__dlpack__(stream=s.ptr)             # a consumer on CuPy's current stream: t is handed to it
current[0] = CupyStream(null=True)
del s; gc.collect()
print(w() is not None)
del t, cap; gc.collect()
print(w() is None)

other = CupyStream(); w = weakref.ref(other)
t = jb.empty(16, "float32", stream=other.ptr)    # not CuPy's current stream: unowned, not kept
print(w() is not None and sys.getrefcount(other) == 2)
del t; gc.collect()
del other
print(FAKE.fake_cuda_live_allocations())
''')
    assert out.split() == ["True", "True", "True", "True", "True", "0"]


def test_a_nested_call_while_arguments_convert_does_not_lose_the_stream_owner():
    # The first argument's __cuda_array_interface__ makes a jitbridge call of its own (a new consumer stream);
    # the Tensor after it is still handed to the launch's stream= object, which it keeps.
    out = check('''
k2 = jb.RawKernel(r"""
extern "C" __global__ void copy(const float* x, float* y, int n) {}""", "copy", arch="sm_90")
other = jb.empty(16, "float32")


class Nested:
    @property
    def __cuda_array_interface__(self):
        jb.as_array(other, stream=2)          # a nested consumer_stream() call
        return {"shape": (16,), "typestr": "<f4", "data": (0x7F0000400000, True), "version": 3, "stream": None}


t = jb.empty(16, "float32")
s = FakeStream(); w = weakref.ref(s)
k2(1, 16, (Nested(), t, 16), stream=s)
assert t.stream == s.handle
del s; gc.collect()
print(w() is not None)
del t, other; gc.collect()
print(w() is None, FAKE.fake_cuda_live_allocations())
''')
    assert out.split() == ["True", "True", "0"]
