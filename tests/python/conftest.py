"""pytest setup for tests/python: finds the built package, isolates the kernel cache, runs the CLI, and the `gpu` marker.

- The package: `import jitbridge` as found; if $JITBRIDGE_BUILD_DIR is set (or jitbridge is not importable
  at all), <build dir>/python goes first on sys.path (default build dir: build/, beside tests/).
- Installed mode, JITBRIDGE_TEST_INSTALLED=1: the build tree's python/ is never put on sys.path; jitbridge must
  come from an installed package (site-packages), else the session stops at its start. The pytest header says
  where jitbridge came from in either mode.
- The test hooks: <build dir>/python_testing (the test-only extension jitbridge_testing) is appended to sys.path
  in both modes when it exists; tests that need it skip without it (testing_hooks.py). The build dir is
  $JITBRIDGE_BUILD_DIR, else the build tree jitbridge was imported from, else build/.
- The cache: JITBRIDGE_CACHE_DIR points at a fresh temporary directory for the whole session, before
  anything compiles (the in-process cache reads it once), so tests never touch ~/.cache/jitbridge.
- `@pytest.mark.gpu` tests are skipped when driver_info() finds no driver or no GPU, unless
  JITBRIDGE_REQUIRE_GPU=1, in which case they run (and fail without a GPU). The `gpu` fixture gives
  device 0's entry of driver_info()["devices"].
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


INSTALLED = os.environ.get("JITBRIDGE_TEST_INSTALLED") == "1"


def _build_dir(name=None):
    """<name> (relative: to the repository root), else build/."""
    build_dir = Path(name or "build")
    return build_dir if build_dir.is_absolute() else ROOT / build_dir


def _put_build_on_path():
    build = os.environ.get("JITBRIDGE_BUILD_DIR")
    if INSTALLED or (build is None and importlib.util.find_spec("jitbridge") is not None):
        return
    python_dir = _build_dir(build) / "python"
    if (python_dir / "jitbridge").is_dir():
        sys.path.insert(0, str(python_dir))


_put_build_on_path()

_SESSION_CACHE = tempfile.mkdtemp(prefix="jitbridge-test-cache-")
os.environ["JITBRIDGE_CACHE_DIR"] = _SESSION_CACHE
os.environ.pop("JITBRIDGE_CACHE", None)

try:
    import jitbridge  # noqa: E402  (after the path and the cache directory are set)
except ImportError as e:
    raise ImportError(f"cannot import jitbridge ({e}); build it first (scripts/setup) and run with "
                      "PYTHONPATH=build/python, or set JITBRIDGE_BUILD_DIR") from e

REQUIRE_GPU = os.environ.get("JITBRIDGE_REQUIRE_GPU") == "1"
PACKAGE_DIR = Path(jitbridge.__file__).resolve().parent


def _installed_problem():
    """Why the imported jitbridge is not an installed package (installed mode), or None."""
    if any(part in ("site-packages", "dist-packages") for part in PACKAGE_DIR.parts):
        return None
    if PACKAGE_DIR.is_relative_to(ROOT):
        return f"it comes from the source or build tree {PACKAGE_DIR}"
    return f"it comes from {PACKAGE_DIR}, which is no site-packages directory"


if INSTALLED and _installed_problem():
    raise pytest.UsageError(f"JITBRIDGE_TEST_INSTALLED=1, but {_installed_problem()}: install the wheel into the "
                            "active environment and leave PYTHONPATH without a build tree")


def _testing_dir():
    """The folder of the test-only extension jitbridge_testing: that of the build tree in use (see above)."""
    build = os.environ.get("JITBRIDGE_BUILD_DIR")
    if build is not None:
        return _build_dir(build) / "python_testing"
    if (PACKAGE_DIR.parent.parent / "CMakeCache.txt").is_file():  # <build>/python/jitbridge
        return PACKAGE_DIR.parent.parent / "python_testing"
    return _build_dir() / "python_testing"


TESTING_DIR = _testing_dir()
if TESTING_DIR.is_dir():
    sys.path.append(str(TESTING_DIR))


def pytest_report_header(config):
    mode = "installed package (JITBRIDGE_TEST_INSTALLED=1)" if INSTALLED else "as found (build tree or installed)"
    spec = importlib.util.find_spec("jitbridge_testing")
    testing = spec.origin if spec else f"not built (no {TESTING_DIR}): the tests that need it skip"
    return [f"jitbridge: {PACKAGE_DIR} [{mode}]", f"jitbridge_testing: {testing}"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu: needs a CUDA driver and a GPU; skipped without one unless JITBRIDGE_REQUIRE_GPU=1",
    )


def pytest_unconfigure(config):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


def gpu_missing_reason():
    """Why GPU tests cannot run here, or None when a driver and a GPU are present."""
    try:
        info = jitbridge.driver_info()
    except jitbridge.DriverError as e:
        return f"the CUDA driver failed: {e}"
    if not info["found"]:
        return info["reason"]
    if not info["devices"]:
        return "the CUDA driver sees no GPU"
    return None


def pytest_collection_modifyitems(config, items):
    if REQUIRE_GPU:
        return
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = gpu_missing_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"no CUDA driver/GPU: {reason}")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def gpu():
    """Device 0 as driver_info() describes it (ordinal, name, compute_capability, arch, total_memory)."""
    reason = gpu_missing_reason()
    if reason is not None:
        if REQUIRE_GPU:
            pytest.fail(f"JITBRIDGE_REQUIRE_GPU=1 but no CUDA driver/GPU: {reason}")
        pytest.skip(f"no CUDA driver/GPU: {reason}")
    return jitbridge.driver_info()["devices"][0]


def package_env(cache_dir, **extra):
    """An environment for a subprocess that imports this same jitbridge and uses `cache_dir`."""
    env = dict(os.environ)
    package_parent = str(Path(jitbridge.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env["JITBRIDGE_CACHE_DIR"] = str(cache_dir)
    env.pop("JITBRIDGE_CACHE", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture
def cache_dir(tmp_path):
    """A kernel cache directory of this test's own, for subprocesses."""
    path = tmp_path / "cache"
    path.mkdir(mode=0o700)  # private whatever the umask: a group-writable one would be refused (issue 29)
    return path


@pytest.fixture
def run_python(cache_dir, tmp_path):
    """run_python(code, **env) runs `python -c code` in a fresh process with this test's cache."""

    def run(code, **env):
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=package_env(cache_dir, **env),
                              capture_output=True, text=True, timeout=300)

    return run


@pytest.fixture
def cli(cache_dir, tmp_path):
    """cli(*args, **env) runs `python -m jitbridge *args` in tmp_path with this test's cache."""

    def run(*args, **env):
        return subprocess.run([sys.executable, "-m", "jitbridge", *map(str, args)], cwd=tmp_path,
                              env=package_env(cache_dir, **env), capture_output=True, text=True, timeout=300)

    return run


@pytest.fixture
def gpu_absent_reason():
    """For tests of the no-driver behaviour: the reason there is no GPU; skipped where one is present."""
    reason = gpu_missing_reason()
    if reason is None:
        pytest.skip("a GPU is present: the no-driver behaviour cannot be observed here")
    return reason
