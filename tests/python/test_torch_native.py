"""jitbridge.torch's native runner without a GPU or torch: declarations written as the add-on's description (rules
traced into expressions, or the reason they stay Python), and the add-on's build at first use (cache key, cache
hit, one build for N processes, every fallback and its one warning), driven by a stand-in torch and compiler."""
import os
import re
import shutil
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import pytest

import jitbridge
import jitbridge.torch as jt
from jitbridge import _opexpr
from jitbridge.torch import addon as native_addon, description
from jitbridge._opspec import OpSpec
from jitbridge.torch import Launch, Output, numel, size

SRC = r'''
template <class T> __global__ void scale(const T* x, T* y, T alpha, long long n) {}
template <class T> __global__ void scale_grad(const T* x, const T* gy, T* gx, T alpha, long long n) {}
extern "C" __global__ void rows(const float* x, float* y, float* partial, long long r, long long c, bool flag) {}
'''


@pytest.fixture(scope="module")
def kernels():
    module = jitbridge.RawModule(code=SRC, arch="sm_90", name_expressions=[
        f"{k}<{t}>" for k in ("scale", "scale_grad") for t in ("float", "double")])
    k = types.SimpleNamespace(rows=module.get_function("rows"))
    k.scale = {t: module.get_function(f"scale<{c}>") for t, c in (("float32", "float"), ("float64", "double"))}
    k.scale_grad = {t: module.get_function(f"scale_grad<{c}>") for t, c in (("float32", "float"), ("float64", "double"))}
    return k


def scale_spec(kernels, grid=lambda x: jt.cdiv(x.numel(), 256), **extra):
    return OpSpec("tests::scale", inputs=("x", "alpha: float"), outputs={"y": Output(like="x")},
                  forward=Launch(kernels.scale, args=("x", "y", "alpha", numel("x")), grid=grid, block=256),
                  save=("x",),
                  backward=Launch(kernels.scale_grad, args=("x", "grad_y", "grad_x", "alpha", numel("x")),
                                  grid=lambda x: (x.numel() + 255) // 256, block=256),
                  grads={"x": Output(like="x")}, **extra)


def test_description_of_a_declaration_with_expression_rules(kernels):
    text, used = description.describe(scale_spec(kernels))
    lines = text.splitlines()
    assert lines[0] == "op tests::scale 2 1"
    assert "saved i 0" in lines and "scalars 1" in lines and "grad_outputs 0" in lines
    assert "grad_inputs 0" in lines and "backward_op tests::scale_backward" in lines
    # forward: slots x=0, alpha=1, y=2; the grid lambda traced into postfix tokens
    assert "grid n0 i256 c" in lines
    assert "arg slot 0" in lines and "arg slot 2" in lines and "arg expr v1" in lines
    assert "allowed float32 float64" in lines
    # backward: x=0, grad_y=1, alpha=2, grad_x=3; (numel + 255) // 256
    assert "grid n0 i255 + i256 /" in lines
    assert lines.count("phase forward") == 1 and lines.count("phase backward") == 1
    assert used == [kernels.scale["float32"], kernels.scale["float64"], kernels.scale_grad["float32"],
                    kernels.scale_grad["float64"]]


def test_shape_rules_scratch_and_bool_scalars(kernels):
    spec = OpSpec("tests::rows", inputs=("x", "flag: bool"), outputs={"y": Output(like="x")},
                  scratch={"partial": Output(shape=lambda x: (jt.cdiv(x.shape[0], 4), x.shape[-1]))},
                  forward=Launch(kernels.rows, args=("x", "y", "partial", size("x", 0), lambda x: x.shape[-1] * 2,
                                                     "flag"),
                                 grid=lambda x: (jt.maximum(1, x.shape[0] // 4), 2), block=(32, 8),
                                 shared_mem=lambda x: jt.minimum(x.shape[-1], 1024) * 4))
    lines = description.describe(spec)[0].splitlines()
    assert "out 2 1 a0 like 0" in lines
    assert "out 3 0 a0 dims 2" in lines and "dim s0:0 i4 c" in lines and "dim s0:-1" in lines
    assert "grid i1 s0:0 i4 / M" in lines and "grid i2" in lines and "block i32" in lines and "block i8" in lines
    assert "shared s0:-1 i1024 m i4 *" in lines
    assert "arg expr s0:0" in lines and "arg expr s0:-1 i2 *" in lines and "arg bool v1" in lines


@pytest.mark.parametrize("grid, reason", [
    (lambda x: max(1, x.numel() // 256), "branch or conversion"),
    (lambda x: x.numel() / 256, "true division"),
    (lambda x: len(x.shape), "sequence"),
    (lambda x: x.data_ptr(), "x.data_ptr"),
])
def test_rules_that_stay_python_say_why(kernels, grid, reason):
    with pytest.raises(_opexpr.NotExpressible, match=reason):
        description.describe(scale_spec(kernels, grid=grid))


def test_check_keeps_the_python_runner(kernels):
    def check(x):
        pass
    with pytest.raises(_opexpr.NotExpressible, match="check= is a Python callable"):
        description.describe(scale_spec(kernels, check=check))


def test_cdiv_minimum_maximum_on_ints_are_plain_python():
    assert (jt.cdiv(10, 4), jt.cdiv(-7, 2), jt.minimum(3, 5), jt.maximum(3, 5)) == (3, -3, 3, 5)


# ---- the build at first use, with a stand-in torch and compiler ---------------------------------------------

FAKE_CXX = textwrap.dedent('''\
    #!/usr/bin/env python3
    import os, sys
    if "--version" in sys.argv:
        print(os.environ.get("FAKE_CXX_ID", "fakecc 1.0")); sys.exit(0)
    with open(os.environ["FAKE_CXX_LOG"], "a") as f:
        f.write(" ".join(sys.argv[1:]) + "\\n")
    if os.environ.get("FAKE_CXX_FAIL"):
        sys.stderr.write("addon.cpp:1: error: boom\\n"); sys.exit(1)
    open(sys.argv[sys.argv.index("-o") + 1], "w").write("not really a library")
    ''')


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A stand-in torch (with its include/torch/library.h), a compiler script that logs each build, and a fresh
    add-on state."""
    root = tmp_path / "torch"
    (root / "include" / "torch").mkdir(parents=True)
    (root / "include" / "torch" / "library.h").write_text("")
    (root / "lib").mkdir()
    torch = types.SimpleNamespace(__file__=str(root / "__init__.py"), __version__="2.11.0+cu130",
                                  version=types.SimpleNamespace(git_version="abc123", cuda="13.0"),
                                  _C=types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True))
    cxx = tmp_path / "fake-cxx"
    cxx.write_text(f"#!{sys.executable}\n" + FAKE_CXX.split("\n", 1)[1])
    cxx.chmod(0o755)
    log = tmp_path / "builds.log"
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("FAKE_CXX_LOG", str(log))
    monkeypatch.setenv("JITBRIDGE_TORCH_NATIVE", "auto")
    monkeypatch.setattr(native_addon, "_state", {"addon": None, "reason": None, "warned": False})
    return types.SimpleNamespace(torch=torch, root=root, cxx=cxx, log=log, cache=tmp_path / "cache")


def builds(fake):
    return fake.log.read_text().splitlines() if fake.log.exists() else []


def test_build_once_then_cached(fake):
    path, record = native_addon.build(fake.torch, root=str(fake.cache))
    assert record["built"] and os.path.isfile(path) and record["torch"] == "2.11.0+cu130"
    command = builds(fake)[0]
    assert "-Wl,--no-undefined" in command and "-D_GLIBCXX_USE_CXX11_ABI=1" in command
    assert "-Wl,--exclude-libs,ALL" in command  # a statically linked C++ runtime stays private (check-torch-addon)
    assert f"-isystem {fake.root / 'include'}" in command and "-lc10 -ltorch_cpu" in command
    assert "torch/extension.h" not in Path(native_addon.SOURCE_DIR, "addon.cpp").read_text()
    path2, record2 = native_addon.build(fake.torch, root=str(fake.cache))
    assert path2 == path and not record2["built"] and record2["seconds"] == record["seconds"]
    assert len(builds(fake)) == 1


def test_cache_key_hashes_every_source_the_build_reads(fake, tmp_path, monkeypatch):
    """SOURCES (hashed into the cache key) is every C++ file of torch_native, and every local header those include
    is one of them or c_api.h (hashed too), so an edit to any rebuilds the add-on instead of reusing a stale one."""
    source_dir = Path(native_addon.SOURCE_DIR)
    assert {p.name for p in source_dir.iterdir() if p.suffix in (".cpp", ".hpp", ".h")} == set(native_addon.SOURCES)
    for name in native_addon.SOURCES:
        for included in re.findall(r'^#include "([^"]+)"', (source_dir / name).read_text(), re.M):
            assert included in native_addon.SOURCES or included == "jitbridge/c_api.h", (name, included)
    copy = tmp_path / "torch_native"
    shutil.copytree(source_dir, copy)
    monkeypatch.setattr(native_addon, "SOURCE_DIR", str(copy))
    info = native_addon.torch_info(fake.torch)
    keys = [native_addon.cache_key(info, "cc 1.0", "0.1")]
    for name in native_addon.SOURCES:
        with open(copy / name, "a") as f:
            f.write("// edited\n")
        keys.append(native_addon.cache_key(info, "cc 1.0", "0.1"))
    assert len(set(keys)) == len(keys) == 1 + len(native_addon.SOURCES)


@pytest.mark.parametrize("change", ["version", "git", "cuda", "abi", "compiler", "flags"])
def test_cache_key_follows_torch_abi_and_compiler(fake, monkeypatch, change):
    native_addon.build(fake.torch, root=str(fake.cache))
    if change == "version":
        fake.torch.__version__ = "2.12.0"
    elif change == "git":
        fake.torch.version.git_version = "def456"
    elif change == "cuda":
        fake.torch.version.cuda = "12.8"
    elif change == "abi":
        fake.torch._C._GLIBCXX_USE_CXX11_ABI = False
    elif change == "flags":  # an add-on cached before a change of the command line is not reused
        monkeypatch.setattr(native_addon, "LINK_FLAGS", native_addon.LINK_FLAGS[:1])
    else:
        monkeypatch.setenv("FAKE_CXX_ID", "fakecc 2.0")
    path, record = native_addon.build(fake.torch, root=str(fake.cache))
    assert record["built"] and len(builds(fake)) == 2


def test_processes_starting_together_build_once(fake):
    script = textwrap.dedent(f'''
        import sys, types
        sys.path[:0] = {sys.path!r}
        from jitbridge.torch import addon as native_addon
        torch = types.SimpleNamespace(__file__={fake.torch.__file__!r}, __version__="2.11.0+cu130",
            version=types.SimpleNamespace(git_version="abc123", cuda="13.0"),
            _C=types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True))
        print(native_addon.build(torch, root={str(fake.cache)!r})[0])
        ''')
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(4)]
    paths = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(paths) == 1 and len(builds(fake)) == 1


def test_no_headers_no_compiler_failed_build_say_why(fake, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    with pytest.raises(native_addon.Unavailable, match="does not run") as e:
        native_addon.build(fake.torch, root=str(fake.cache))
    assert "set CXX" in e.value.fix
    monkeypatch.setenv("CXX", str(fake.cxx))
    monkeypatch.setenv("FAKE_CXX_FAIL", "1")
    with pytest.raises(native_addon.Unavailable, match="boom") as e:
        native_addon.build(fake.torch, root=str(fake.cache))
    assert "-Wl,--no-undefined" in e.value.why and "JITBRIDGE_TORCH_NATIVE=0" in e.value.fix
    assert not list(fake.cache.glob("*.so")) and not list(fake.cache.glob("*.tmp*"))  # nothing half-written
    (fake.root / "include" / "torch" / "library.h").unlink()
    with pytest.raises(native_addon.Unavailable, match="no C.. headers"):
        native_addon.build(fake.torch, root=str(fake.cache))
    monkeypatch.delenv("CXX")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert native_addon.compiler() is None


def test_a_directory_others_can_write_is_refused(fake):
    """The kernel cache's check (check_private_directory, issue 29), not a copy of it: the directory itself, and an
    ancestor others can write without the sticky bit."""
    fake.cache.mkdir(mode=0o700)
    fake.cache.chmod(0o777)
    with pytest.raises(native_addon.Unavailable, match="writable by group and others") as e:
        native_addon.build(fake.torch, root=str(fake.cache))
    assert "chmod go-w" in e.value.fix and not builds(fake)
    fake.cache.chmod(0o700)
    open_parent = fake.cache / "open"
    open_parent.mkdir(mode=0o700)
    open_parent.chmod(0o777)
    with pytest.raises(native_addon.Unavailable, match="open") as e:
        native_addon.build(fake.torch, root=str(open_parent / "torch_native"))
    assert not (open_parent / "torch_native").exists() and not builds(fake)


def test_a_missing_directory_is_made_private(fake):
    root = fake.cache / "a" / "torch_native"
    path, record = native_addon.build(fake.torch, root=str(root))
    assert record["built"] and os.path.dirname(path) == str(root)
    assert (root.stat().st_mode & 0o777) == 0o700


def test_fallback_warns_once_and_modes(fake, monkeypatch):
    monkeypatch.setenv("FAKE_CXX_FAIL", "1")
    monkeypatch.setattr(native_addon, "_cache_root", lambda: str(fake.cache))
    with pytest.warns(native_addon.NativeRunnerWarning, match="boom.*JITBRIDGE_TORCH_NATIVE=0"):
        assert native_addon.load(fake.torch) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native_addon.load(fake.torch) is None  # no second warning, no second build
    assert len(builds(fake)) == 1
    monkeypatch.setenv("JITBRIDGE_TORCH_NATIVE", "1")
    with pytest.raises(native_addon.NativeRunnerError, match="boom"):
        native_addon.load(fake.torch)
    monkeypatch.setenv("JITBRIDGE_TORCH_NATIVE", "0")
    assert native_addon.load(fake.torch) is None and native_addon.mode() == "off"
    assert native_addon.unavailable_reason() == "off: JITBRIDGE_TORCH_NATIVE=0"
    monkeypatch.setenv("JITBRIDGE_TORCH_NATIVE", "yes")
    with pytest.raises(native_addon.NativeRunnerError, match="use 0"):
        native_addon.mode()


def test_off_first_does_not_stop_a_later_build(fake, monkeypatch):
    monkeypatch.setattr(native_addon, "_cache_root", lambda: str(fake.cache))
    monkeypatch.setenv("JITBRIDGE_TORCH_NATIVE", "0")
    assert native_addon.load(fake.torch) is None and not builds(fake)
    monkeypatch.setenv("JITBRIDGE_TORCH_NATIVE", "auto")
    with pytest.warns(native_addon.NativeRunnerWarning, match="could not be loaded"):
        native_addon.load(fake.torch)
    assert len(builds(fake)) == 1  # it was tried once the mode allowed it


def test_a_library_that_does_not_load_falls_back(fake, monkeypatch):
    # the fake compiler writes a file that is no shared library: loading it fails, with the reason
    monkeypatch.setattr(native_addon, "_cache_root", lambda: str(fake.cache))
    with pytest.warns(native_addon.NativeRunnerWarning, match="could not be loaded"):
        assert native_addon.load(fake.torch) is None


def test_native_runner_is_on_unless_turned_off(monkeypatch):
    monkeypatch.delenv("JITBRIDGE_TORCH_NATIVE", raising=False)
    assert native_addon.mode() == "auto"
    for value, mode in (("", "auto"), ("auto", "auto"), ("0", "off"), ("1", "required")):
        monkeypatch.setenv("JITBRIDGE_TORCH_NATIVE", value)
        assert native_addon.mode() == mode


def test_doctor_reports_the_add_on(monkeypatch):
    monkeypatch.setenv("JITBRIDGE_TORCH_NATIVE", "auto")
    out = subprocess.run([sys.executable, "-m", "jitbridge", "doctor"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    line = next(l for l in out.stdout.splitlines() if l.startswith("torch add-on:"))
    try:
        import torch  # noqa: F401
        assert "built" in line or "unavailable" in line
    except ImportError:
        assert "torch is not installed" in line
    off = subprocess.run([sys.executable, "-m", "jitbridge", "doctor"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), JITBRIDGE_TORCH_NATIVE="0"))
    assert "off (JITBRIDGE_TORCH_NATIVE=0): ops use the Python runner" in off.stdout


def test_checks_become_expressions_and_raise_the_same_error_in_python(kernels):
    check = jt.Check(lambda x, alpha: (x.dim() >= 1) & (x.shape[-1] > 0) & (alpha == alpha), "x must not be empty")
    spec = scale_spec(kernels, check=(check, jt.Check(lambda x: x.numel() <= 1 << 30, "x is too large")))
    lines = description.describe(spec)[0].splitlines()
    assert "names x alpha" in lines
    assert "checkmsg x must not be empty" in lines and "check 0 r0 i1 >= s0:-1 i0 > & v1 v1 == &" in lines
    assert "checkmsg x is too large" in lines and "check 0 n0 i1073741824 <=" in lines
    # the Python runner (and the fake) call the same Checks
    fn = spec.forward.check_getter.fn
    x = types.SimpleNamespace(shape=(3, 0), dim=lambda: 2, numel=lambda: 0)
    with pytest.raises(ValueError, match=r"^x must not be empty; got x \[3, 0\]$"):
        fn(x=x, alpha=1.0)
    fn(x=types.SimpleNamespace(shape=(3, 2), dim=lambda: 2, numel=lambda: 6), alpha=1.0)
    scalar = types.SimpleNamespace(shape=(), dim=lambda: 0, numel=lambda: 1)
    with pytest.raises(ValueError, match="x must not be empty"):  # shape[-1] of a 0-d tensor: the check fails
        fn(x=scalar, alpha=1.0)


def test_where_and_comparisons_trace(kernels):
    spec = scale_spec(kernels, grid=lambda x: jt.where(x.shape[-1] <= 512, 128, 256))
    assert "grid s0:-1 i512 <= i128 i256 ?" in description.describe(spec)[0].splitlines()
    assert jt.where(True, 1, 2) == 1 and jt.where(0, 1, 2) == 2


def test_a_callable_that_is_no_raw_kernel_keeps_python(kernels):
    spec = OpSpec("tests::k", inputs=("x",), outputs={"y": Output(like="x")},
                  forward=Launch(lambda grid, block, args: None, args=("x", "y"), grid=1, block=32))
    with pytest.raises(_opexpr.NotExpressible, match="not a jitbridge.RawKernel"):
        description.describe(spec)
