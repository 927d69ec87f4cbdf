"""fake_driver.py — runs Python code in a child process on the fake driver of tests/fuzz/fake_cuda (built into
<build>/tests/fake_cuda as libcuda.so.1: made-up sm_90 GPUs), with jitbridge and jitbridge_testing importable.

The test skips when the fake driver was not built. Two forms:
- `run_child(code)` prepends `PRELUDE`, which gives the child `FAKE` (the fake driver through ctypes) and
  `FakeStream` (tests/fuzz/python/lifetime_machine.py), a stream object like a framework's: created by the fake
  driver, destroyed in __del__, exposing __cuda_stream__. Any driver call on a destroyed stream aborts the child.
  Returns the CompletedProcess.
- `run_json_child(code, devices)` runs `code` as it is on `devices` made-up GPUs; the child prints one JSON line
  last, which comes back decoded (a non-zero exit fails the test). `LAUNCH_PRELUDE` + code gives such a child the
  fake driver's record of the last launch and exchange-API arrays.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import jitbridge
from testing_hooks import hooks

MACHINE_DIR = Path(__file__).resolve().parents[1] / "fuzz" / "python"    # lifetime_machine.py
PRELUDE = f"""
import gc, sys, weakref
import jitbridge as jb
sys.path.insert(0, {str(MACHINE_DIR)!r})
from lifetime_machine import FakeStream, fake_driver
FAKE = fake_driver()
"""

# For children run with run_json_child: FAKE (the fake driver jitbridge loaded), last_launch() (its record of the last
# cuLaunchKernel as a dict: count, grid, block, buffer_form, pointer_form, params as hex: kernelParams launches
# rebuilt from the cubin's parameter info, gaps 0) and ExchangeArray, arrays of a synthetic
# framework with the DLPack C exchange API (jitbridge_testing.exchange_api; their memory is never touched).
LAUNCH_PRELUDE = r"""
import ctypes
import jitbridge_testing as _hooks

FAKE = ctypes.CDLL("libcuda.so.1")


class _Launch(ctypes.Structure):   # tests/fuzz/fake_cuda/fake_cuda.h, FakeCudaLaunch
    _fields_ = [("count", ctypes.c_uint64), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("cluster", ctypes.c_uint * 3), ("shared_mem", ctypes.c_uint), ("cooperative", ctypes.c_int),
                ("programmatic", ctypes.c_int), ("buffer_form", ctypes.c_int), ("pointer_form", ctypes.c_int),
                ("param_bytes", ctypes.c_size_t),
                ("params", ctypes.c_ubyte * 4096)]


def last_launch():
    out = _Launch()
    FAKE.fake_cuda_last_launch(ctypes.byref(out))
    return dict(count=out.count, grid=out.grid[0], block=out.block[0], buffer_form=out.buffer_form,
                pointer_form=out.pointer_form, params=bytes(out.params[:out.param_bytes]).hex())


class ExchangeArray:
    def __init__(self, ptr, shape, dtype="float32", device=(2, 0), owner=None, strides=None):
        self._ptr, self._shape, self._dtype, self._device = ptr, tuple(shape), dtype, tuple(device)
        self._strides, self.owner = strides, owner


ExchangeArray.__dlpack_c_exchange_api__ = _hooks.exchange_api(factory=ExchangeArray)
"""


def fake_driver_env(extra=None):
    """The environment of a child on the fake driver; skips the test when the fake driver is not built."""
    testing = Path(hooks.module().__file__).resolve().parent            # <build>/python_testing
    fake = testing.parent / "tests" / "fake_cuda"
    if not (fake / "libcuda.so.1").is_file():
        pytest.skip(f"the fake driver is not built (no {fake}/libcuda.so.1): build with JITBRIDGE_BUILD_TESTS=ON")
    env = dict(os.environ)
    package_parent = str(Path(jitbridge.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, str(testing), env.get("PYTHONPATH")) if p)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(fake), env.get("LD_LIBRARY_PATH")) if p)
    env.pop("FAKE_CUDA_STALE_STREAMS", None)
    env.update(extra or {})
    return env


def run_child(code, args=(), extra_env=None, timeout=300):
    """Runs PRELUDE + code in a child Python on the fake driver; returns the CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-c", PRELUDE + code, *args], capture_output=True, text=True,
                          timeout=timeout, env=fake_driver_env(extra_env))


def run_json_child(code, devices=1, timeout=300):
    """Runs `code` with FAKE_CUDA_DEVICES=`devices`; returns the JSON of its last stdout line."""
    env = fake_driver_env({"FAKE_CUDA_DEVICES": str(devices)})
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
