"""Where NVRTC, nvJitLink and the CUDA headers come from at run time: the wheel roots, each rule of the search order
and its precedence, header fallbacks, the not-found errors, doctor (text and --json), cache hits that load no NVRTC.
Each case runs a fresh process: the search is process-global and runs once.

The children see only what a test gives them, whatever runs the tests (a build tree, an installed wheel in a venv
whose site-packages or .pth lines hold real nvidia/cu13 wheels, JITBRIDGE_NVRTC or CUDA_HOME set): `python -S`
(no site-packages, no .pth lines), a sys.path of a directory holding only a link to this jitbridge plus the test's
sites, and none of the search's variables unless the test sets them. This machine's NVRTC reaches a child only as
links in a test's fake tree."""

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

import jitbridge
from jitbridge import _cuda_search
from conftest import package_env

PACKAGE_DIR = Path(jitbridge.__file__).resolve().parent
# Every variable the search reads: removed from a child's environment unless a test sets it.
SEARCH_VARIABLES = ("JITBRIDGE_NVRTC", "JITBRIDGE_NVJITLINK", "JITBRIDGE_CUDA_INCLUDE", "CUDA_HOME", "CUDA_PATH")
# A child's interpreter: no site module, so no site-packages and no .pth lines (PYTHONPATH still counts).
PYTHON = [sys.executable, "-S"]
FP16_KERNEL = r"""
#include <cuda_fp16.h>
extern "C" __global__ void k(__half* x) { x[0] = __float2half(1.0f); }
"""


def _search():
    return jitbridge._core._cuda_search()


def _real_nvrtc():
    """This machine's NVRTC (the one this test process loaded, wherever from), or skip. Children get it only as
    links in a fake tree (_link_nvrtc, _fake_toolkit), never from where it lies: that may be a wheel root."""
    pick = _search()["nvrtc"]
    if not pick["found"]:
        pytest.skip("no NVRTC on this machine")
    return Path(pick["path"])


@functools.lru_cache(maxsize=None)
def _package_only():
    """A directory holding only a link to this jitbridge: its parent (a build tree's python/ or a site-packages)
    may hold other things, nvidia/cu13 among them, that must not reach a child's sys.path."""
    path = Path(tempfile.mkdtemp(prefix="jitbridge-package-only-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    (path / "jitbridge").symlink_to(PACKAGE_DIR, target_is_directory=True)
    return str(path)


def _env(cache_dir, sites=(), **extra):
    """A child environment (for PYTHON): this jitbridge, then `sites`, on sys.path; the search variables only as
    `extra` sets them."""
    env = package_env(cache_dir, **extra)
    for name in SEARCH_VARIABLES:
        if name not in extra:
            env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join([_package_only(), *map(str, sites)])
    if "JITBRIDGE_CACHE" not in extra:
        env["JITBRIDGE_CACHE"] = "0"
    return env


def _doctor(tmp_path, cache_dir, sites=(), wrap=(), **extra):
    """(exit status, report) of `python -m jitbridge doctor --json` in a child."""
    r = subprocess.run([*wrap, *PYTHON, "-m", "jitbridge", "doctor", "--json"], cwd=tmp_path,
                       env=_env(cache_dir, sites, **extra), capture_output=True, text=True, timeout=300)
    assert r.stdout.startswith("{"), r.stderr
    return r.returncode, json.loads(r.stdout)


def _python(tmp_path, cache_dir, code, sites=(), wrap=(), **extra):
    return subprocess.run([*wrap, *PYTHON, "-c", code], cwd=tmp_path, env=_env(cache_dir, sites, **extra),
                          capture_output=True, text=True, timeout=300)


def _put(path, text="x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _link_nvrtc(lib_dir, real):
    """lib_dir/libnvrtc.so.13 (and its builtins) as links to this machine's NVRTC."""
    lib_dir.mkdir(parents=True, exist_ok=True)
    for f in real.parent.glob("libnvrtc*.so.13*"):
        if "alt" not in f.name:
            (lib_dir / f.name).symlink_to(f)
    return lib_dir / "libnvrtc.so.13"


def _fake_wheel(site, nvrtc=None, fp16=None, cccl=False):
    """site/nvidia/cu13 with, as asked, lib/libnvrtc.so.13 (links to `nvrtc`'s files, or a file that is no
    library), include/cuda_fp16.h holding `fp16`, include/cccl/cuda/std/type_traits."""
    root = site / "nvidia" / "cu13"
    (root / "lib").mkdir(parents=True)
    if nvrtc == "broken":
        _put(root / "lib" / "libnvrtc.so.13", "not a library")
    elif nvrtc is not None:
        _link_nvrtc(root / "lib", nvrtc)
    if fp16 is not None:
        _put(root / "include" / "cuda_fp16.h", fp16)
    if cccl:
        _put(root / "include" / "cccl" / "cuda" / "std" / "type_traits")
    return root


def _fake_toolkit(root, nvrtc):
    _link_nvrtc(root / "lib64", nvrtc)
    _put(root / "include" / "cuda_fp16.h", "#define FAKE_TOOLKIT_FP16 1\n")
    return root


# ---- the wheel roots ---------------------------------------------------------------------------

def test_wheel_roots_are_the_nvidia_cu13_dirs_of_absolute_path_entries_in_order(tmp_path, monkeypatch):
    a, b, c = (tmp_path / n for n in "abc")
    for site in (a, c):
        (site / "nvidia" / "cu13").mkdir(parents=True)
    (b / "nvidia").mkdir(parents=True)  # a CUDA 12 layout or another namespace: no cu13
    monkeypatch.chdir(c)
    roots = _cuda_search.wheel_roots([str(c), "", "nvidia-is-here-but-relative", str(b), str(a), str(c) + "/",
                                      str(tmp_path / "missing"), 42])
    assert roots == [str(c / "nvidia" / "cu13"), str(a / "nvidia" / "cu13")]


def test_import_hands_the_wheel_roots_over_and_loads_nothing(tmp_path, cache_dir):
    site = tmp_path / "site"
    _fake_wheel(site, fp16="")
    r = _python(tmp_path, cache_dir, "import jitbridge\n"
                "maps = open('/proc/self/maps').read()\n"
                "print('nvrtc' in maps, 'nvJitLink' in maps)\n"
                "print(jitbridge._core._cuda_search()['wheel_roots'])", sites=[site])
    assert r.returncode == 0, r.stderr
    loaded, roots = r.stdout.splitlines()
    assert loaded == "False False"
    assert roots == repr([str(site / "nvidia" / "cu13")])


def test_children_see_only_what_the_test_gives_them(tmp_path, cache_dir, monkeypatch):
    """The isolation every test here relies on: this process's search variables and site-packages (which may hold
    real nvidia/cu13 wheels, also through .pth lines) do not reach a child."""
    for name in SEARCH_VARIABLES:
        monkeypatch.setenv(name, str(tmp_path / "ambient" / name))
    site = tmp_path / "site"
    _fake_wheel(site)
    r = _python(tmp_path, cache_dir, "import os, sys, jitbridge\n"
                "print(jitbridge._core._cuda_search()['wheel_roots'])\n"
                f"print([n for n in {SEARCH_VARIABLES!r} if n in os.environ])\n"
                "print([p for p in sys.path if 'site-packages' in p or os.path.isdir(os.path.join(p, 'nvidia'))])\n",
                sites=[site], CUDA_HOME=tmp_path / "mine")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [repr([str(site / "nvidia" / "cu13")]), "['CUDA_HOME']", repr([str(site)])]


def test_wheel_roots_cannot_change_after_the_search(tmp_path, cache_dir):
    """The same roots again are fine; others are refused once the search ran."""
    site = tmp_path / "site"
    _fake_wheel(site, fp16="")
    r = _python(tmp_path, cache_dir, "import jitbridge\nroots = jitbridge._core._cuda_search()['wheel_roots']\n"
                "print(roots)\njitbridge._core._set_wheel_roots(roots)\n"
                "try:\n    jitbridge._core._set_wheel_roots(['/x/nvidia/cu13'])\n"
                "except RuntimeError as e:\n    print(e)\n", sites=[site])
    assert r.returncode == 0, r.stderr
    roots, error = r.stdout.splitlines()
    assert roots == repr([str(site / "nvidia" / "cu13")])
    assert "the CUDA search already ran" in error


# ---- the rules and their precedence (fake trees around this machine's NVRTC) ---------------------

def test_an_explicit_setting_to_nothing_is_an_error_naming_it(tmp_path, cache_dir):
    missing = tmp_path / "nowhere" / "libnvrtc.so.13"
    r = _python(tmp_path, cache_dir, "import jitbridge\n"
                "try:\n    jitbridge.compile('extern \"C\" __global__ void k() {}', arch='sm_90')\n"
                "except jitbridge.CudaNotFoundError as e:\n"
                "    print(isinstance(e, RuntimeError), isinstance(e, jitbridge.NvrtcError))\n    print(e)\n",
                JITBRIDGE_NVRTC=missing)
    assert r.returncode == 0, r.stderr
    kinds, message = r.stdout.splitlines()
    assert kinds == "True True"
    assert message == (f"NVRTC could not be loaded: JITBRIDGE_NVRTC={missing}: no such file (unset it to search "
                       "the Python environment's wheels and the CUDA toolkits)")
    status, report = _doctor(tmp_path, cache_dir, JITBRIDGE_NVRTC=missing)
    assert status == 1
    assert report["cuda"]["nvrtc"]["found"] is False
    assert report["cuda"]["nvrtc"]["error"].startswith(f"JITBRIDGE_NVRTC={missing}: no such file")
    assert report["problems"][0] == "NVRTC was not found"

    status, report = _doctor(tmp_path, cache_dir, JITBRIDGE_CUDA_INCLUDE=tmp_path / "no-include")
    assert status == 1
    assert report["cuda"]["cuda_headers"]["error"].startswith(f"JITBRIDGE_CUDA_INCLUDE={tmp_path / 'no-include'}: ")
    r = _python(tmp_path, cache_dir, "import jitbridge\n"
                "try:\n    jitbridge.compile('extern \"C\" __global__ void k() {}', arch='sm_90')\n"
                "except jitbridge.CudaNotFoundError as e:\n    print(e)\n",
                JITBRIDGE_CUDA_INCLUDE=tmp_path / "no-include")
    assert r.stdout.startswith(f"JITBRIDGE_CUDA_INCLUDE={tmp_path / 'no-include'}: "), r.stdout + r.stderr


def test_the_device_runtime_setting_is_used_or_an_error_naming_it(tmp_path, cache_dir):
    """JITBRIDGE_CUDADEVRT: doctor reports it; a -dc program with a device launch needs it, a plain one does not."""
    missing = tmp_path / "nowhere" / "libcudadevrt.a"
    status, report = _doctor(tmp_path, cache_dir, JITBRIDGE_CUDADEVRT=missing)
    devrt = report["cuda"]["device_runtime"]
    assert devrt["found"] is False
    assert devrt["error"].startswith(f"JITBRIDGE_CUDADEVRT={missing}: no such file")
    assert "device runtime" not in " ".join(report["problems"])  # compiling works without it
    code = ("import jitbridge\n"
            "print(jitbridge.compile('extern \"C\" __global__ void k(int* p) { *p = 1; }', options=['-dc'],"
            " arch='sm_90').linked)\n"
            "src = 'extern \"C\" __global__ void c(int* p) { *p = 1; }\\n"
            "extern \"C\" __global__ void p(int* q) { c<<<1, 1>>>(q); }'\n"
            "try:\n    jitbridge.compile(src, options=['-dc'], arch='sm_90')\n"
            "except jitbridge.CudaNotFoundError as e:\n    print(e)\n")
    r = _python(tmp_path, cache_dir, code, JITBRIDGE_CUDADEVRT=missing)
    assert r.returncode == 0, r.stderr
    linked, message = r.stdout.splitlines()
    assert linked == "True"
    assert message.startswith(f"the CUDA device runtime could not be used: JITBRIDGE_CUDADEVRT={missing}: no such file")
    real = _search()["device_runtime"]
    if real["found"]:
        _, report = _doctor(tmp_path, cache_dir, JITBRIDGE_CUDADEVRT=real["path"])
        assert report["cuda"]["device_runtime"]["rule"] == "JITBRIDGE_CUDADEVRT"


def test_env_beats_wheel_beats_cuda_home(tmp_path, cache_dir):
    real = _real_nvrtc()
    site = tmp_path / "site"
    _fake_wheel(site, nvrtc=real, fp16="#define FAKE_WHEEL_FP16 1\n", cccl=True)
    home = _fake_toolkit(tmp_path / "cuda-home", real)
    mine = _link_nvrtc(tmp_path / "mine" / "lib", real)

    _, report = _doctor(tmp_path, cache_dir, sites=[site], CUDA_HOME=home)
    nvrtc = report["cuda"]["nvrtc"]
    assert (nvrtc["rule"], nvrtc["path"]) == (f"wheel nvidia-cuda-nvrtc in {site}",
                                             str(site / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13"))
    assert nvrtc["version"].startswith("13.")
    assert report["cuda"]["cuda_headers"]["rule"] == f"wheel nvidia-cuda-runtime in {site}"

    _, report = _doctor(tmp_path, cache_dir, sites=[site], CUDA_HOME=home, JITBRIDGE_NVRTC=mine)
    nvrtc = report["cuda"]["nvrtc"]
    assert (nvrtc["rule"], nvrtc["path"], nvrtc["tried"]) == ("JITBRIDGE_NVRTC", str(mine), [])

    _, report = _doctor(tmp_path, cache_dir, CUDA_HOME=home)
    nvrtc = report["cuda"]["nvrtc"]
    assert (nvrtc["rule"], nvrtc["path"]) == ("CUDA_HOME", str(home / "lib64" / "libnvrtc.so.13"))
    assert report["cuda"]["cuda_headers"]["rule"] == "CUDA_HOME"
    assert report["cuda"]["cuda_headers"]["path"] == str((home / "include").resolve())
    # CUDA_HOME's include has no CCCL: the next place down the order that has it, said so.
    cccl = report["cuda"]["cccl_headers"]
    if cccl["found"]:
        assert cccl["rule"] != "CUDA_HOME"
        assert cccl["note"] == f"NVRTC's own place ({home}) has no cuda/std"


def test_a_broken_wheel_copy_is_skipped_with_the_reason(tmp_path, cache_dir):
    real = _real_nvrtc()
    site = tmp_path / "site"
    _fake_wheel(site, nvrtc="broken")
    home = _fake_toolkit(tmp_path / "cuda-home", real)
    _, report = _doctor(tmp_path, cache_dir, sites=[site], CUDA_HOME=home)
    nvrtc = report["cuda"]["nvrtc"]
    assert nvrtc["rule"] == "CUDA_HOME"
    wheel_step = nvrtc["tried"][1]
    assert wheel_step["rule"] == f"wheel nvidia-cuda-nvrtc in {site}"
    assert wheel_step["path"] == str(site / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13")
    assert wheel_step["why"].startswith("could not be loaded: ")


def test_mixed_setup_nvrtc_from_a_bare_copy_headers_from_the_wheel(tmp_path, cache_dir, cli):
    """JITBRIDGE_NVRTC at a copy of the library in a directory without headers, cuda_fp16.h from the runtime
    wheel: the compile really reads the wheel's header."""
    real = _real_nvrtc()
    site = tmp_path / "site"
    wheel_header = "#define FAKE_WHEEL_FP16 1\nstruct __half { unsigned short x; };\n"
    _fake_wheel(site, fp16=wheel_header)
    mine = _link_nvrtc(tmp_path / "copy" / "lib", real)
    _, report = _doctor(tmp_path, cache_dir, sites=[site], JITBRIDGE_NVRTC=mine)
    headers = report["cuda"]["cuda_headers"]
    assert headers["rule"] == f"wheel nvidia-cuda-runtime in {site}"
    assert headers["note"] == f"NVRTC's own place ({tmp_path / 'copy'}) has no cuda_fp16.h"
    assert {"rule": "beside NVRTC (JITBRIDGE_NVRTC)", "path": str(tmp_path / "copy" / "include"),
            "why": "no cuda_fp16.h there"} in headers["tried"]
    r = _python(tmp_path, cache_dir, "import jitbridge\n"
                "p = jitbridge.compile('#include <cuda_fp16.h>\\n#if !FAKE_WHEEL_FP16\\n#error not the wheel\\n#endif\\n"
                "extern \"C\" __global__ void k(__half* h) {}', arch='sm_90')\n"
                "print(p.kernels[0].signature)", sites=[site], JITBRIDGE_NVRTC=mine)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(__half*)"

    text = subprocess.run([*PYTHON, "-m", "jitbridge", "doctor"], cwd=tmp_path,
                          env=_env(cache_dir, [site], JITBRIDGE_NVRTC=mine), capture_output=True, text=True)
    assert f"NVRTC:         {mine} (" in text.stdout and "from JITBRIDGE_NVRTC)" in text.stdout, text.stdout
    assert f"  NVRTC's own place ({tmp_path / 'copy'}) has no cuda_fp16.h" in text.stdout, text.stdout


# ---- a cache hit loads no NVRTC (the key names the located file) ---------------------------------

# Compiles each source given on the command line; prints per compile its origin and whether libnvrtc and
# libnvJitLink are mapped in this process afterwards.
_COMPILE_AND_MAPS = """
import sys, jitbridge
for src in sys.argv[1:]:
    try:
        origin = jitbridge.compile(src, arch='sm_90').origin
    except Exception as e:
        origin = f'{type(e).__name__}: {e}'
    maps = open('/proc/self/maps').read()
    print(origin, 'libnvrtc' in maps, 'libnvJitLink' in maps)
"""


def _compile_in_child(tmp_path, cache_dir, *sources, sites=(), **extra):
    r = subprocess.run([*PYTHON, "-c", _COMPILE_AND_MAPS, *sources], cwd=tmp_path,
                       env=_env(cache_dir, sites, JITBRIDGE_CACHE="1", **extra), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def _kernel(n):
    return f'extern "C" __global__ void k{n}(float* x) {{ x[0] = {n}.0f; }}'


def test_a_disk_hit_in_a_fresh_process_loads_no_nvrtc_and_a_miss_then_does(tmp_path, cache_dir):
    home = _fake_toolkit(tmp_path / "cuda-home", _real_nvrtc())
    assert _compile_in_child(tmp_path, cache_dir, _kernel(1), CUDA_HOME=home) == ["compiled True False"]
    # A fresh process: the hit maps no NVRTC; the miss after it in the same process loads NVRTC and compiles.
    assert _compile_in_child(tmp_path, cache_dir, _kernel(1), _kernel(2), _kernel(1), CUDA_HOME=home) == [
        "disk False False", "compiled True False", "memory True False"]


def test_the_key_names_the_located_nvrtc_file(tmp_path, cache_dir):
    """JITBRIDGE_NVRTC at a copy of the library: its own entries; a new mtime on the copy is a miss."""
    real = _real_nvrtc().resolve()
    copy_dir = tmp_path / "copy" / "lib"
    _link_nvrtc(copy_dir, real)
    mine = copy_dir / "libnvrtc.so.13"
    mine.unlink()
    shutil.copy2(real, mine)
    src = _kernel(3)
    assert _compile_in_child(tmp_path, cache_dir, src, JITBRIDGE_NVRTC=mine) == ["compiled True False"]
    assert _compile_in_child(tmp_path, cache_dir, src, JITBRIDGE_NVRTC=mine) == ["disk False False"]
    # Another file (this machine's own NVRTC, through CUDA_HOME's links) has entries of its own.
    home = _fake_toolkit(tmp_path / "cuda-home", real)
    assert _compile_in_child(tmp_path, cache_dir, src, CUDA_HOME=home) == ["compiled True False"]
    assert _compile_in_child(tmp_path, cache_dir, src, CUDA_HOME=home) == ["disk False False"]
    stat = mine.stat()
    os.utime(mine, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert _compile_in_child(tmp_path, cache_dir, src, JITBRIDGE_NVRTC=mine) == ["compiled True False"]


def test_an_unsupported_arch_is_refused_by_nvrtc_on_a_miss(tmp_path, cache_dir):
    home = _fake_toolkit(tmp_path / "cuda-home", _real_nvrtc())
    r = _python(tmp_path, cache_dir, "import jitbridge\n"
                "try:\n    jitbridge.compile('extern \"C\" __global__ void k() {}', arch='sm_12345')\n"
                "except ValueError as e:\n    print(e)\n"
                "try:\n    jitbridge.compile('__device__ int x;', arch='sm_9x')\n"
                "except ValueError as e:\n    print(e)\n", JITBRIDGE_CACHE="1", CUDA_HOME=home)
    assert r.returncode == 0, r.stderr
    unsupported, malformed = r.stdout.splitlines()
    major, minor = jitbridge.nvrtc_version()
    assert unsupported.startswith(f"arch: NVRTC {major}.{minor} cannot build 'sm_12345'; it supports sm_"), unsupported
    assert malformed == "arch: 'sm_9x' is not a CUDA target; expected sm_XY, sm_XYa, sm_XYf or compute_XY (e.g. sm_90)"


def test_a_located_file_that_proves_unusable_hands_key_and_headers_to_the_loaded_one(tmp_path, cache_dir):
    """The broken wheel copy is located first; the compile loads CUDA_HOME's NVRTC and takes its headers (not the
    wheel's), and the entry it stores is found again in the next process (after that process's load)."""
    real = _real_nvrtc()
    site = tmp_path / "site"
    _fake_wheel(site, nvrtc="broken", fp16="#error the broken wheel's header\n")
    home = _fake_toolkit(tmp_path / "cuda-home", real)
    src = "#include <cuda_fp16.h>\n#if !FAKE_TOOLKIT_FP16\n#error not CUDA_HOME's\n#endif\n" + _kernel(4)
    assert _compile_in_child(tmp_path, cache_dir, src, sites=[site], CUDA_HOME=home) == ["compiled True False"]
    assert _compile_in_child(tmp_path, cache_dir, src, sites=[site], CUDA_HOME=home) == ["disk True False"]


# ---- nothing there (a private mount namespace hides the toolkit; root only) -----------------------

def _hide(*dirs, files=()):
    """A command prefix that runs the rest with tmpfs mounted over `dirs` and an empty file bound over each of
    `files`, or skip. The child's interpreter and this jitbridge must stay visible."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("hiding the toolkit needs root and unshare")
    hidden = [*dirs, *files]
    for needed in (sys.executable, os.__file__, PACKAGE_DIR):
        real = os.path.realpath(needed)
        if any(real == h or real.startswith(h.rstrip("/") + "/") for h in hidden):
            pytest.skip(f"{real} (needed by the child) lies in {hidden}, which must be hidden")
    mounts = [f"mount -t tmpfs none '{d}'" for d in dirs]
    if files:
        empty = tempfile.NamedTemporaryFile(prefix="jitbridge-hidden-")
        atexit.register(empty.close)
        mounts += [f"mount --bind '{empty.name}' '{f}'" for f in files]
    mounts = " && ".join(mounts)
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", f"{mounts} && true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot hide the toolkit here: {probe.stderr.strip()}")
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", f'{mounts} && exec "$@"', "sh"]


# Prints the files the loader path resolves NVRTC's and nvJitLink's sonames to (ldconfig, LD_LIBRARY_PATH).
_LOADER_PATH_FILES = """
import ctypes
for soname in ('libnvrtc.so.13', 'libnvJitLink.so.13'):
    try:
        ctypes.CDLL(soname)
    except OSError:
        continue
    for line in open('/proc/self/maps'):
        if soname.split('.')[0] + '.so' in line:
            print(line.split()[-1])
"""


def _hide_all_cuda(tmp_path, cache_dir):
    """A command prefix under which a child (as _env makes it: no wheel roots, no search variables) finds no NVRTC,
    no nvJitLink and no CUDA headers: the standard toolkit root hidden, and what the loader path still resolves the
    libraries to with it hidden (an ldconfig entry, LD_LIBRARY_PATH) replaced by empty files; or skip. Nothing is
    taken from this process's own pick: JITBRIDGE_NVRTC or CUDA_HOME may point anywhere, a venv among it."""
    standard = os.path.realpath("/usr/local/cuda")
    dirs = [standard] if os.path.isdir(standard) else []
    wrap = _hide(*dirs)
    r = subprocess.run([*wrap, *PYTHON, "-c", _LOADER_PATH_FILES], cwd=tmp_path, env=_env(cache_dir),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    files = sorted({os.path.realpath(f) for f in r.stdout.split()})
    return _hide(*dirs, files=files) if files else wrap


def test_nothing_found_import_works_and_compile_says_what_to_install(tmp_path, cache_dir):
    wrap = _hide_all_cuda(tmp_path, cache_dir)
    r = _python(tmp_path, cache_dir, "import jitbridge\n"
                "try:\n    jitbridge.compile('extern \"C\" __global__ void k() {}', arch='sm_90')\n"
                "except jitbridge.CudaNotFoundError as e:\n    print(e)\n", wrap=wrap)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("NVRTC was not found: pip install nvidia-cuda-nvrtc nvidia-cuda-runtime "
                               "nvidia-cuda-cccl, or install the CUDA toolkit (searched: JITBRIDGE_NVRTC: not set; "
                               "CUDA_HOME: not set; CUDA_PATH: not set; /usr/local/cuda"), r.stdout
    assert "loader path libnvrtc.so.13: could not be loaded: " in r.stdout
    status, report = _doctor(tmp_path, cache_dir, wrap=wrap)
    assert status == 1
    assert report["usable"] is False
    assert [report["cuda"][k]["found"] for k in ("nvrtc", "nvjitlink", "cuda_headers", "cccl_headers")] == [False] * 4
    assert report["problems"] == ["NVRTC was not found", "the CUDA headers (cuda_fp16.h) were not found",
                                  "the CCCL headers (cuda/std, cub) were not found"]


def test_headers_missing_adds_a_hint_to_the_compile_error(tmp_path, cache_dir):
    real = _real_nvrtc()
    include = Path("/usr/local/cuda").resolve() / "include"
    if not include.is_dir():
        pytest.skip("no toolkit include directory to hide")
    wrap = _hide(str(include))
    mine = _link_nvrtc(tmp_path / "copy" / "lib", real)
    r = _python(tmp_path, cache_dir, "import jitbridge\n"
                f"try:\n    jitbridge.compile({FP16_KERNEL!r}, arch='sm_90')\n"
                "except jitbridge.CompileError as e:\n    print(e.log)\n", wrap=wrap, JITBRIDGE_NVRTC=mine)
    assert r.returncode == 0, r.stderr
    assert 'open source file "cuda_fp16.h"' in r.stdout, r.stdout
    assert ("jitbridge: note: the CUDA headers (cuda_fp16.h, cuda_bf16.h, ...) and the CCCL headers (cuda/std, cub) "
            "were not found: pip install nvidia-cuda-runtime nvidia-cuda-cccl") in r.stdout, r.stdout
    text = subprocess.run([*wrap, *PYTHON, "-m", "jitbridge", "doctor"], cwd=tmp_path,
                          env=_env(cache_dir, JITBRIDGE_NVRTC=mine), capture_output=True, text=True)
    assert text.returncode == 1
    assert "CUDA headers:  not found" in text.stdout, text.stdout
    assert "status:        cannot compile: the CUDA headers (cuda_fp16.h) were not found" in text.stdout, text.stdout


# ---- a real wheel ------------------------------------------------------------------------------

def _unpack_wheels(site):
    house = os.environ.get("JITBRIDGE_TEST_WHEELHOUSE")
    if not house:
        pytest.skip("JITBRIDGE_TEST_WHEELHOUSE (a directory with nvidia_cuda_nvrtc-13*.whl) is not set")
    wheels = sorted(Path(house).glob("nvidia_*.whl"))
    if not any(w.name.startswith("nvidia_cuda_nvrtc-13") for w in wheels):
        pytest.skip(f"no nvidia_cuda_nvrtc-13*.whl in {house}")
    names = []
    for w in wheels:
        with zipfile.ZipFile(w) as z:
            z.extractall(site)
        names.append(w.name.split("-")[0])
    return names


def test_nvrtc_from_a_real_wheel(tmp_path, cache_dir):
    site = tmp_path / "site"
    names = _unpack_wheels(site)
    lib = site / "nvidia" / "cu13" / "lib"
    for so in lib.glob("*.so*"):  # zipfile drops the permission bits
        so.chmod(0o755)
    _, report = _doctor(tmp_path, cache_dir, sites=[site])
    nvrtc = report["cuda"]["nvrtc"]
    assert nvrtc["rule"] == f"wheel nvidia-cuda-nvrtc in {site}"
    assert nvrtc["path"] == str(lib / "libnvrtc.so.13")
    assert nvrtc["note"] is None  # its builtins were loaded from beside it
    kernel = FP16_KERNEL if "nvidia_cuda_runtime" in names else 'extern "C" __global__ void k(int* x) {}'
    code = ("import jitbridge\n"
            f"p = jitbridge.compile({kernel!r}, arch='sm_90')\n"
            "print(p.kernels[0].signature)\n"
            "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libnvrtc' in l}))\n")
    r = _python(tmp_path, cache_dir, code, sites=[site])
    assert r.returncode == 0, r.stderr
    signature, maps = r.stdout.splitlines()
    assert signature in ("(__half*)", "(int*)")
    loaded = eval(maps)  # noqa: S307 - our own child's print of a list of str
    assert str(lib / "libnvrtc.so.13") in loaded
    assert all(p.startswith(str(lib)) for p in loaded), loaded  # builtins too: none from a toolkit
    if "nvidia_cuda_runtime" in names:
        assert report["cuda"]["cuda_headers"]["rule"] == f"wheel nvidia-cuda-runtime in {site}"
    if "nvidia_nvjitlink" in names:
        assert report["cuda"]["nvjitlink"]["rule"] == f"wheel nvidia-nvjitlink in {site}"
        assert report["cuda"]["nvjitlink"]["version"].startswith("13.")
