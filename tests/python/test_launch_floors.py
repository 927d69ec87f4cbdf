"""The launch benchmarks' floors (jitbridge_testing.raw_launch_batch, prepared, launch_phases: test-only code in
python/testing/launch_floors.cpp), without a GPU: a child on the fake driver of tests/fuzz/fake_cuda launches them
with arrays of a synthetic exchange-API framework, and the fake driver's record of the last launch shows what reached
cuLaunchKernel (the launch shortcut's bytes, padding included, too). Also: _core carries none of this code."""
import shutil
import subprocess
from pathlib import Path

import pytest

from fake_driver import LAUNCH_PRELUDE, run_json_child
from jitbridge import _core

CHILD = LAUNCH_PRELUDE + r'''
import json, random
import jitbridge
import jitbridge_testing as hooks

last, Fake = last_launch, ExchangeArray
k = jitbridge.RawKernel(r"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {}""", "axpy", arch="sm_90")
a = random.uniform(0.5, 2.0)
n = random.randrange(1, 1 << 20)
x, y = Fake(0x7F0000010000 + 256 * random.randrange(100), (n,)), Fake(0x7F0000020000, (n,))
out = {"a": a, "n": n, "x": x._ptr, "y": y._ptr}
k(3, 64, (a, x, y, n))
out["call"] = last()
shortcuts = hooks.shortcut_launches(k)
k(3, 64, (a, x, y, n))   # the second call takes the shortcut, which packs on its own stack buffer
out["shortcut"] = dict(last(), took=hooks.shortcut_launches(k) - shortcuts)
before = last()["count"]
us = hooks.raw_launch_batch(k, 3, 64, (a, x, y, n), 10)
out["batch"] = dict(last(), launches=last()["count"] - before, us=us)
hooks.raw_launch_batch(k, 3, 64, (a, x, y, n), 1, buffer_form=True)
out["batch_buffer"] = last()
floor = hooks.prepared(k, 3, 64, (a, x, y, n))
floor()
out["floor"] = last()
x2 = Fake(0x7F0000030000, (n,))
floor(a, x2, y, n)
out["floor_exchanging"] = dict(last(), x=x2._ptr)
try:
    floor(a, x)
except TypeError as e:
    out["wrong_count"] = str(e)
phases = hooks.launch_phases(k, (3,), (64,), (a, x, y, n), 5)
out["phases"] = sorted(phases)
out["phase_values_positive"] = all(v >= 0 for v in phases.values())
print(json.dumps(out))
'''


def _params(a, x, y, n):
    import struct
    # axpy(float, const float*, float*, int): 4 bytes, 4 of padding (zero), two pointers, an int
    return (struct.pack("<f", a) + bytes(4) + struct.pack("<QQi", x, y, n)).hex()


def test_floors_launch_what_the_kernel_call_packs():
    r = run_json_child(CHILD)
    want = _params(r["a"], r["x"], r["y"], r["n"])
    assert r["call"]["params"] == want and r["call"]["grid"] == 3 and r["call"]["block"] == 64
    # the full path (its ArgBuffer's pointers) and the shortcut (a stack array into its space) pass kernelParams:
    # the fake driver rebuilds the space from the cubin's parameter info (gaps 0), the buffer form's bytes exactly
    assert r["call"]["pointer_form"] and not r["call"]["buffer_form"]
    assert r["shortcut"]["took"] == 1 and r["shortcut"]["params"] == want
    assert r["shortcut"]["pointer_form"] and not r["shortcut"]["buffer_form"]
    # the floor's array-of-pointers form
    assert r["batch"]["launches"] == 10 and not r["batch"]["buffer_form"] and r["batch"]["grid"] == 3
    assert r["batch"]["pointer_form"] and r["batch"]["params"] == want
    assert r["batch"]["us"] > 0
    assert r["batch_buffer"]["params"] == want and r["batch_buffer"]["buffer_form"]
    assert r["floor"]["params"] == want and r["floor"]["buffer_form"]
    # called with arguments, the floor reads each exchange-API array's address afresh
    assert r["floor_exchanging"]["params"] == _params(r["a"], r["floor_exchanging"]["x"], r["y"], r["n"])
    assert "no arguments or the prepared ones" in r["wrong_count"]
    # (no producer rows: the first argument is a float, not an exchange-API array)
    assert r["phases"] == sorted(["consumer_stream", "convert_arguments", "raw cuLaunchKernel (one buffer)",
                                  "launch, kernel[grid, block](*args) from C++"])
    assert r["phase_values_positive"]


def test_core_carries_no_benchmark_code():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm on this machine to list _core's symbols")
    out = subprocess.run([nm, "-C", str(Path(_core.__file__))], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for name in ("prepare_floor", "launch_profile", "raw_launch_batch", "launch_phases", "PreparedLaunch", "Floor"):
        assert name not in out.stdout, f"_core has {name}"
