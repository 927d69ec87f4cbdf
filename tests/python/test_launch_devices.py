"""The launch shortcut on several devices, without a GPU: every device is a fast device.

A child Python runs on the fake driver of tests/fuzz/fake_cuda (built into <build>/tests/fake_cuda as libcuda.so.1,
FAKE_CUDA_DEVICES=3 made-up sm_90 GPUs; it records each cuLaunchKernel and the device whose context was current)
with arrays of a synthetic DLPack exchange-API framework (jitbridge_testing.exchange_api) on cuda:0, cuda:1 and
cuda:2. jitbridge_testing.shortcut_launches(kernel) counts the launches that took the shortcut. The child records
each call; the tests below check the records: a launch alternating between devices takes the shortcut on each once
the kernel has been resolved there, reaches the driver on the arrays' device with their addresses, and the shortcut
declines (the full path runs and words the error) where it must."""
import pytest

from fake_driver import run_json_child

CHILD = r'''
import ctypes, json, sys
import jitbridge
import jitbridge_testing as hooks

FAKE = ctypes.CDLL("libcuda.so.1")   # the fake driver jitbridge loaded


class Launch(ctypes.Structure):   # tests/fuzz/fake_cuda/fake_cuda.h, FakeCudaLaunch
    _fields_ = [("count", ctypes.c_uint64), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("cluster", ctypes.c_uint * 3), ("shared_mem", ctypes.c_uint), ("cooperative", ctypes.c_int),
                ("programmatic", ctypes.c_int), ("buffer_form", ctypes.c_int), ("param_bytes", ctypes.c_size_t),
                ("params", ctypes.c_ubyte * 4096)]


class Fake:   # a framework with the DLPack C exchange API (jitbridge_testing); memory is never touched
    def __init__(self, ptr, shape, dtype="float32", device=(2, 0), owner=None, strides=None):
        self._ptr, self._shape, self._dtype, self._device = ptr, tuple(shape), dtype, tuple(device)
        self._strides, self.owner = strides, owner


Fake.__dlpack_c_exchange_api__ = hooks.exchange_api(factory=Fake)
k = jitbridge.RawKernel(r"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {}""", "axpy", arch="sm_90")
records = []
address = [0x7F0000010000]


def array(device):
    address[0] += 0x10000   # a new address every time: the launch must pass this call's
    return Fake(address[0], (1000,), device=(2 if device >= 0 else 1, max(device, 0)))


def call(label, a, x, y, n, block=128):
    before = fake_count()
    shortcuts = hooks.shortcut_launches(k)
    error = None
    try:
        k(8, block, (a, x, y, n))
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    last = Launch()
    FAKE.fake_cuda_last_launch(ctypes.byref(last))
    params = bytes(last.params[:last.param_bytes])
    records.append(dict(label=label, error=error, launched=last.count - before,
                        took_shortcut=hooks.shortcut_launches(k) - shortcuts,
                        device=FAKE.fake_cuda_last_launch_device(), block=last.block[0],
                        a=ctypes.c_float.from_buffer_copy(params, 0).value if params else None,
                        x=int.from_bytes(params[8:16], "little") if params else None,
                        y=int.from_bytes(params[16:24], "little") if params else None,
                        n=int.from_bytes(params[24:28], "little", signed=True) if params else None,
                        want_x=x._ptr, want_y=y._ptr))


def fake_count():
    last = Launch()
    FAKE.fake_cuda_last_launch(ctypes.byref(last))
    return last.count


# 1. learnt on cuda:0, resolved on cuda:1 by its first launch there, then alternating
call("first on cuda:0", 1.5, array(0), array(0), 1000)
call("first on cuda:1", 2.5, array(1), array(1), 1001)
for i in range(8):
    call(f"alternating {i}", 0.5 + i, array(i % 2), array(i % 2), 900 + i)
# 2. declines: arrays of two devices; host memory; a device never launched on (then its second launch)
call("two devices", 1.0, array(0), array(1), 1000)
call("host memory", 1.0, array(-1), array(-1), 1000)
call("first on cuda:2", 3.5, array(2), array(2), 1002)
call("second on cuda:2", 4.5, array(2), array(2), 1003)
# 3. the configuration is still checked per device: a new block, a block over the limit, on each device
for d in (1, 0, 1, 0):
    call(f"block 256 on cuda:{d}", 1.0, array(d), array(d), 1000, block=256)
call("block 2048 on cuda:1", 1.0, array(1), array(1), 1000, block=2048)
call("block 2048 on cuda:0", 1.0, array(0), array(0), 1000, block=2048)
call("block 128 on cuda:1 again", 1.0, array(1), array(1), 1000)
print(json.dumps(records))
'''


@pytest.fixture(scope="module")
def records():
    """The child's records, by label."""
    return {r["label"]: r for r in run_json_child(CHILD, devices=3)}


def assert_launched(r, device, shortcut):
    assert r["error"] is None, r
    assert r["launched"] == 1 and r["device"] == device, r
    assert r["took_shortcut"] == (1 if shortcut else 0), r
    # the driver got this call's arrays and values, in the kernel's parameter layout
    assert (r["x"], r["y"]) == (r["want_x"], r["want_y"]), r


def test_the_first_launch_on_each_device_takes_the_full_path(records):
    assert_launched(records["first on cuda:0"], 0, shortcut=False)
    assert_launched(records["first on cuda:1"], 1, shortcut=False)   # resolves the kernel on cuda:1
    assert records["first on cuda:1"]["n"] == 1001 and records["first on cuda:1"]["a"] == 2.5


def test_launches_alternating_between_devices_all_take_the_shortcut(records):
    for i in range(8):
        r = records[f"alternating {i}"]
        assert_launched(r, i % 2, shortcut=True)
        assert r["n"] == 900 + i and r["a"] == 0.5 + i, r


def test_the_shortcut_declines_where_the_full_path_must_decide(records):
    for label, words in (("two devices", "all arrays must be on one device"), ("host memory", "cpu")):
        r = records[label]
        assert r["error"] is not None and words in r["error"], r
        assert r["launched"] == 0 and r["took_shortcut"] == 0, r
    # a device where the kernel was never resolved: the full path first (it checks the binary runs there)
    assert_launched(records["first on cuda:2"], 2, shortcut=False)
    assert_launched(records["second on cuda:2"], 2, shortcut=True)


def test_the_launch_configuration_is_checked_on_every_device(records):
    for d in (1, 0, 1, 0):
        r = records[f"block 256 on cuda:{d}"]
        assert_launched(r, d, shortcut=True)
        assert r["block"] == 256, r
    for d in (1, 0):
        r = records[f"block 2048 on cuda:{d}"]
        assert r["error"] is not None and r["error"].startswith("ValueError: block: 2048 threads exceed"), r
        assert r["launched"] == 0 and r["took_shortcut"] == 0, r
    r = records["block 128 on cuda:1 again"]
    assert_launched(r, 1, shortcut=True)
    assert r["block"] == 128, r
