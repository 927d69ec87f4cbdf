"""fake_driver.py — runs Python code in a child process on the fake driver of tests/fuzz/fake_cuda (built into
<build>/tests/fake_cuda as libcuda.so.1: made-up sm_90 GPUs), with jitbridge and jitbridge_testing importable.

The child prints one JSON line last; run_child returns it decoded. Skips when the fake driver is not built."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import jitbridge
from testing_hooks import hooks


def run_child(code, devices=1, timeout=300):
    """Runs `code` with FAKE_CUDA_DEVICES=`devices`; returns the JSON of its last stdout line."""
    testing = Path(hooks.module().__file__).resolve().parent            # <build>/python_testing
    fake = testing.parent / "tests" / "fake_cuda"
    if not (fake / "libcuda.so.1").is_file():
        pytest.skip(f"the fake driver is not built (no {fake}/libcuda.so.1): build with JITBRIDGE_BUILD_TESTS=ON")
    env = dict(os.environ)
    package_parent = str(Path(jitbridge.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, str(testing), env.get("PYTHONPATH")) if p)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(fake), env.get("LD_LIBRARY_PATH")) if p)
    env["FAKE_CUDA_DEVICES"] = str(devices)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
