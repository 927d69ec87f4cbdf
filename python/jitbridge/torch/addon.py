"""jitbridge/torch/addon.py — the torch add-on (jitbridge/torch_native/addon.cpp): built at first use in a subprocess
with a plain C++ compiler command against the installed torch's headers and libraries, cached in jitbridge's cache
directory under a key made of torch's version and build, its C++ ABI flag, the compiler and its fixed flags,
jitbridge's version and the sources; one process builds while the others wait on a file lock; loaded with
ctypes.PyDLL (its calls hold the GIL).

JITBRIDGE_TORCH_NATIVE unset (or auto) builds it at first need, and a failure warns once (why, and how to fix it)
and ops use the Python runner; =0 turns it off; =1 makes any failure an error."""

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings

#: The add-on's C++ sources (shipped in the package, beside this package).
SOURCE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_native")
SOURCES = ("addon.cpp", "plan.hpp", "run_phase.hpp", "expr.hpp")
_CAPSULE = b"jitbridge._core._c_api"


class NativeRunnerWarning(RuntimeWarning):
    """The torch add-on could not be built or loaded: ops use the Python runner."""


class NativeRunnerError(RuntimeError):
    """JITBRIDGE_TORCH_NATIVE=1 and the add-on could not be built or loaded."""


def mode():
    """'auto' (JITBRIDGE_TORCH_NATIVE unset, empty or auto: the default), 'off' (=0) or 'required' (=1)."""
    value = os.environ.get("JITBRIDGE_TORCH_NATIVE", "").strip()
    if value in ("", "auto"):
        return "auto"
    if value == "0":
        return "off"
    if value == "1":
        return "required"
    raise NativeRunnerError(f"JITBRIDGE_TORCH_NATIVE={value!r}: use 0 or leave it unset (off), auto, or 1 (required)")


def c_api_include():
    """The directory holding jitbridge/c_api.h: the package's copy, else the source tree's (running from a checkout).
    None if neither exists."""
    for d in (os.path.join(SOURCE_DIR, "include"),
              os.path.join(SOURCE_DIR, "..", "..", "..", "launch", "include")):
        if os.path.isfile(os.path.join(d, "jitbridge", "c_api.h")):
            return os.path.abspath(d)
    return None


def compiler():
    """The C++ compiler command: $CXX, else g++ or c++ on PATH; None if there is none."""
    cxx = os.environ.get("CXX")
    if cxx:
        return cxx
    return shutil.which("g++") or shutil.which("c++")


def _compiler_id(cxx):
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise Unavailable(f"the C++ compiler {cxx!r} does not run ({e})",
                           "install g++ (apt install g++) or set CXX to a C++17 compiler") from None
    return (out.stdout.splitlines() or ["?"])[0].strip()


class Unavailable(Exception):
    """Why the add-on is unavailable, and how to fix it."""

    def __init__(self, why, fix):
        super().__init__(why)
        self.why, self.fix = why, fix


def torch_info(torch):
    """What the build depends on: directories and the identity of the installed torch."""
    root = os.path.dirname(os.path.abspath(torch.__file__))
    return {"version": torch.__version__, "git": getattr(torch.version, "git_version", None),
            "cuda": getattr(torch.version, "cuda", None), "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
            "include": os.path.join(root, "include"), "lib": os.path.join(root, "lib")}


def build_command(cxx, info, include, source, output):
    """The compiler command line: only the torch headers addon.cpp includes, the two torch libraries it links,
    and every symbol resolved at link time (-Wl,--no-undefined).

    -Wl,--exclude-libs,ALL keeps whatever a static archive brings private. A compiler that links its C++ runtime
    statically (the H100 machine's CXX=/opt/gcc/bin/g++ takes its own libstdc++.a) would otherwise export that copy
    beside torch's libstdc++.so, calls would bind half to one copy and half to the other, and an ostream built by one
    and formatted by the other crashed (SIGSEGV in std::ostream::_M_insert<long> while a check's message was made).
    With the dynamic runtime there is no archive and the flag changes nothing."""
    return [cxx, *COMPILE_FLAGS, f"-D_GLIBCXX_USE_CXX11_ABI={info['abi']}", "-isystem", info["include"], "-I",
            include, "-I", SOURCE_DIR, source, "-o", output, f"-L{info['lib']}", "-lc10", "-ltorch_cpu",
            f"-Wl,-rpath,{info['lib']}", *LINK_FLAGS]


# The fixed flags of build_command; both are part of the cache key, so a change of them rebuilds a cached add-on.
COMPILE_FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", "-w")
LINK_FLAGS = ("-Wl,--no-undefined", "-Wl,--exclude-libs,ALL")


def cache_key(info, compiler_id, version):
    h = hashlib.sha256()
    parts = [info["version"], info["git"], info["cuda"], info["abi"], compiler_id, version, sys.platform,
             *COMPILE_FLAGS, *LINK_FLAGS]
    h.update(json.dumps([str(p) for p in parts]).encode())
    for name in SOURCES:
        with open(os.path.join(SOURCE_DIR, name), "rb") as f:
            h.update(f.read())
    include = c_api_include()
    if include:
        with open(os.path.join(include, "jitbridge", "c_api.h"), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:24]


def _cache_root():
    import jitbridge
    directory = jitbridge.cache_info().get("directory")
    if not directory:
        raise Unavailable("jitbridge has no cache directory to build the add-on in",
                           "set JITBRIDGE_CACHE_DIR to a writable directory")
    return os.path.join(directory, "torch_native")


def _lock(path):
    """An exclusive flock on ``path`` (created); returns the open file, whose closing releases it."""
    import fcntl
    f = open(path, "a+b")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    except BaseException:
        f.close()
        raise
    return f


def build(torch, *, root=None):
    """Builds the add-on if its cache entry is missing and returns (path, record): record says the key, the command,
    whether it was built now and how long it took. Raises Unavailable with why and how to fix it."""
    import jitbridge
    include = c_api_include()
    if include is None:
        raise Unavailable("jitbridge/c_api.h is not in the installed package", "reinstall jitbridge")
    info = torch_info(torch)
    if not os.path.isfile(os.path.join(info["include"], "torch", "library.h")):
        raise Unavailable(f"the installed torch has no C++ headers ({info['include']}/torch/library.h is missing)",
                           "install a torch wheel that ships its headers (the PyPI and pytorch.org wheels do)")
    cxx = compiler()
    if cxx is None:
        raise Unavailable("no C++ compiler (g++ or c++ on PATH, or $CXX)",
                           "install g++ (apt install g++) or set CXX to a C++17 compiler")
    compiler_id = _compiler_id(cxx)
    root = root or _cache_root()
    key = cache_key(info, compiler_id, jitbridge.__version__)
    _check_private(root)
    path = os.path.join(root, f"addon-{key}.so")
    record_path = os.path.join(root, f"addon-{key}.json")
    if os.path.isfile(path):
        return path, _read_record(record_path, built=False)
    with _lock(os.path.join(root, f"addon-{key}.lock")):
        if os.path.isfile(path):  # another process built it while this one waited
            return path, _read_record(record_path, built=False)
        fd, tmp = tempfile.mkstemp(prefix=f"addon-{key}.", suffix=".tmp.so", dir=root)
        os.close(fd)
        cmd = build_command(cxx, info, include, os.path.join(SOURCE_DIR, "addon.cpp"), tmp)
        start = time.monotonic()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.SubprocessError) as e:
            os.unlink(tmp)
            raise Unavailable(f"the build command failed to run ({e}): {' '.join(cmd)}",
                               "check the compiler, or set JITBRIDGE_TORCH_NATIVE=0") from None
        seconds = time.monotonic() - start
        if done.returncode != 0:
            os.unlink(tmp)
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            raise Unavailable(f"building the add-on failed (exit {done.returncode}) with:\n  {' '.join(cmd)}\n"
                               f"{tail}", "fix the compiler setup shown, or set JITBRIDGE_TORCH_NATIVE=0")
        record = {"key": key, "torch": info["version"], "torch_git": info["git"], "torch_cuda": info["cuda"],
                  "abi": info["abi"], "compiler": compiler_id, "jitbridge": jitbridge.__version__,
                  "command": cmd, "seconds": round(seconds, 2)}
        with open(record_path, "w") as f:
            json.dump(record, f, indent=1)
        os.replace(tmp, path)
        return path, dict(record, built=True)


def _check_private(root):
    """The add-on is loaded into the process, so its directory gets the kernel cache's check (issue 29:
    jitbridge::detail::check_private_directory, through _core._check_private_directory), made (mode 0700) when
    missing: this user's (or a member of $JITBRIDGE_CACHE_TRUST_GROUP's), writable by no one else, every ancestor
    safe too (a library planted there would run as this user). Raises Unavailable naming the problem."""
    from .. import _core
    check = _core._check_private_directory(root, create=True)
    if not check["ok"]:
        fix = check["fix"] or "set JITBRIDGE_CACHE_DIR to a directory of your own"
        raise Unavailable(f"{check['problem'] or root + ' cannot be used'}; the add-on is not built or loaded there",
                           fix)


def _read_record(path, built):
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        record = {}
    return dict(record, built=built)


class Addon:
    """The loaded add-on: register(description, kernels) gives an op its native kernels."""

    def __init__(self, path, record):
        import jitbridge._core as core
        self.path, self.record = path, record
        self._lib = ctypes.PyDLL(path)
        self._lib.jitbridge_torch_native_init.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        self._lib.jitbridge_torch_native_register.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.py_object),
                                                              ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        table = get(core._c_api, _CAPSULE)
        why = ctypes.create_string_buffer(1024)
        if self._lib.jitbridge_torch_native_init(table, why, len(why)) != 0:
            raise Unavailable(why.value.decode(errors="replace"), "rebuild: python -m jitbridge torch build")

    def register(self, description, kernels):
        """Registers (or replaces) the native kernels of one op. Raises RuntimeError with the add-on's reason."""
        array = (ctypes.py_object * max(1, len(kernels)))(*kernels)
        why = ctypes.create_string_buffer(2048)
        if self._lib.jitbridge_torch_native_register(description.encode(), array, len(kernels), why, len(why)):
            raise RuntimeError(why.value.decode(errors="replace"))


_state = {"addon": None, "reason": None, "warned": False}
_state_lock = threading.Lock()


def load(torch):
    """The loaded add-on, building it on first use; None when it is off or unavailable (then one
    NativeRunnerWarning per process says why and how to fix it). Raises NativeRunnerError instead when
    JITBRIDGE_TORCH_NATIVE=1."""
    m = mode()
    if m == "off":
        return None
    with _state_lock:
        if _state["addon"] is not None:
            return _state["addon"]
        if _state["reason"] is None or m == "required":
            try:
                path, record = build(torch)
                _state["addon"] = Addon(path, record)
                _state["reason"] = None
                return _state["addon"]
            except Unavailable as e:
                _state["reason"] = f"{e.why} (to fix: {e.fix})"
            except OSError as e:
                _state["reason"] = f"the add-on could not be loaded ({e}) (to fix: python -m jitbridge torch build)"
            except Exception as e:  # noqa: BLE001 - an unusable torch installation: the Python runner, with why
                _state["reason"] = (f"{type(e).__name__}: {e} (to fix: check the torch installation, or set "
                                    f"JITBRIDGE_TORCH_NATIVE=0)")
        if m == "required":
            raise NativeRunnerError(f"jitbridge.torch native runner (JITBRIDGE_TORCH_NATIVE=1): {_state['reason']}")
        if not _state["warned"]:
            _state["warned"] = True
            warnings.warn(f"jitbridge.torch: the native runner is unavailable, ops use the Python runner (slower "
                          f"autograd): {_state['reason']}; JITBRIDGE_TORCH_NATIVE=0 silences this",
                          NativeRunnerWarning, stacklevel=3)
        return None


def unavailable_reason():
    """Why load() gave None (None if it has not been tried or worked)."""
    try:
        if mode() == "off":
            return "off: JITBRIDGE_TORCH_NATIVE=0"
    except NativeRunnerError as e:
        return str(e)
    return _state["reason"]


def status():
    """The add-on's state for doctor, building nothing: mode, torch, compiler, the cache entry and whether it
    exists, or the reason it cannot be built."""
    report = {"mode": None, "torch": None, "compiler": None, "path": None, "built": False, "reason": None}
    try:
        report["mode"] = mode()
    except NativeRunnerError as e:
        report["reason"] = str(e)
        return report
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        report["reason"] = "torch is not installed"
        return report
    try:
        import torch
        import jitbridge
        info = torch_info(torch)
        report["torch"] = f"{info['version']} (CUDA {info['cuda']}, C++11 ABI {info['abi']})"
        cxx = compiler()
        if cxx is None:
            raise Unavailable("no C++ compiler (g++ or c++ on PATH, or $CXX)", "install g++ or set CXX")
        compiler_id = _compiler_id(cxx)
        report["compiler"] = compiler_id
        if not os.path.isfile(os.path.join(info["include"], "torch", "library.h")):
            raise Unavailable("the installed torch has no C++ headers", "install a torch wheel with its headers")
        key = cache_key(info, compiler_id, jitbridge.__version__)
        report["path"] = os.path.join(_cache_root(), f"addon-{key}.so")
        report["built"] = os.path.isfile(report["path"])
    except Unavailable as e:
        report["reason"] = f"{e.why} (to fix: {e.fix})"
    except Exception as e:  # noqa: BLE001 - doctor reports, it never crashes
        report["reason"] = f"{type(e).__name__}: {e}"
    return report
