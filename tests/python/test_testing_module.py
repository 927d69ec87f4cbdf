"""The split between jitbridge._core and the test-only jitbridge_testing: no hook left in the production module, and
a jitbridge_testing that refuses a _core whose _internals table it does not know."""
import os
from pathlib import Path

import pytest

import jitbridge
from jitbridge import _core
from testing_hooks import hooks

OLD_HOOKS = ["_testing_capsule", "_testing_deleter_count", "_testing_exchange_api", "_testing_buffer_refs",
             "_adapter_protocol", "_cupy_stream_reader", "_bench_view"]


BENCH_HOOKS = ["_raw_launch_batch", "_prepared", "_launch_phases"]  # now jitbridge_testing's (bench_launch.py)
KERNEL_HOOKS = ["_pack", "_shortcuts"]  # now jitbridge_testing.pack_args and kernel_shortcuts


def test_production_module_has_no_test_hooks():
    assert [name for name in OLD_HOOKS if hasattr(_core, name)] == []
    assert [name for name in BENCH_HOOKS + KERNEL_HOOKS if hasattr(_core._Kernel, name)] == []
    assert [name for name in KERNEL_HOOKS if hasattr(jitbridge.RawKernel, name)] == []
    assert not hasattr(_core, "_Prepared")
    assert type(_core._internals).__name__ == "PyCapsule"


def test_benchmark_floors_refuse_what_is_no_kernel():
    for call in (lambda: hooks.raw_launch_batch(3, 1, 32, (), 1), lambda: hooks.prepared("k", 1, 32, ()),
                 lambda: hooks.launch_phases(None, 1, 32, (), 1)):
        with pytest.raises(TypeError, match="expected a RawKernel"):
            call()


@pytest.mark.parametrize("hook", ["pack_args", "kernel_shortcuts", "shortcut_launches", "use_target"])
def test_kernel_hooks_refuse_what_is_no_kernel(hook):
    call = getattr(hooks, hook)
    module = jitbridge.RawModule('extern "C" __global__ void k(int n) {}', arch="sm_90")
    for wrong, name in [(None, "NoneType"), (3, "int"), ("k", "str"), (module, "RawModule"),
                        (module.get_function("k")[1, 32], "_Configured")]:
        with pytest.raises(TypeError, match=rf"^{hook}: kernel: expected a RawKernel \(jitbridge._core._Kernel\), "
                                            rf"got {name}$"):
            call(wrong)
    for cls in (jitbridge.RawKernel, _core._Kernel):  # made by __new__ alone: never initialised
        with pytest.raises(TypeError, match="not initialised"):
            call(cls.__new__(cls))


def test_kernel_hooks_read_a_kernel():
    k = jitbridge.RawModule('extern "C" __global__ void k(int n, double x) {}', arch="sm_90").get_function("k")
    assert hooks.pack_args(k, 7, 0.5) == [(7).to_bytes(4, "little"), bytes.fromhex("000000000000e03f")]
    with pytest.raises(TypeError, match=r"^k\(int, double\) takes 2 arguments, 1 given$"):
        hooks.pack_args(k, 7)  # one argument short: the launch's own error
    assert hooks.kernel_shortcuts(k) == []  # none learnt without a launch


def _refusal(run_python, table):
    """Imports jitbridge_testing in a fresh process whose _core._internals was replaced by `table` (Python code
    that sets `capsule`); returns that process's output."""
    testing = hooks.module()
    path = os.pathsep.join([str(Path(jitbridge.__file__).resolve().parent.parent),
                            str(Path(testing.__file__).resolve().parent)])
    code = f"""
import ctypes
import jitbridge._core as core
new = ctypes.pythonapi.PyCapsule_New
new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
name = ctypes.create_string_buffer(b"jitbridge._core._internals")
{table}
core._internals = capsule
try:
    import jitbridge_testing
except ImportError as e:  # a failed module init (pybind11 turns its exception into ImportError)
    print("refused:", e)
else:
    print("accepted")
"""
    out = run_python(code, PYTHONPATH=path)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_testing_module_refuses_another_table_version(run_python):
    table = ("fields = (ctypes.c_uint32 * 2)(999, 8)\n"
             "capsule = new(ctypes.addressof(fields), ctypes.cast(name, ctypes.c_char_p), None)")
    out = _refusal(run_python, table)
    assert "refused: jitbridge_testing: jitbridge._core's _internals table is version 999 (8 bytes)" in out
    assert "build jitbridge_testing from the same commit" in out


def test_testing_module_refuses_a_core_without_the_table(run_python):
    out = _refusal(run_python, "capsule = 'not a capsule'")
    assert "refused: jitbridge_testing: jitbridge._core has no usable _internals table" in out
