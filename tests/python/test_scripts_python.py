"""test_scripts_python.py — which Python the scripts build for (scripts/_lib.sh's jb_python): PYTHON when set, else
the one project venv, made once from the python3 on PATH; an active environment is named, not installed into; a
system Python that pip will not install into (PEP 668) is refused with the fix (no GPU, no build needed)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "scripts" / "_lib.sh"


def jb_python(root, **env):
    """Runs jb_python with ROOT=root and the given environment; returns (exit code, PYTHON it chose, stderr+out)."""
    script = f'set -euo pipefail; ROOT={root}; . {LIB}; jb_python; echo "PYTHON=$PYTHON"'
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VIRTUAL_ENV", "CONDA_PREFIX", "JITBRIDGE_VENV")}
    full.update(env)
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=full, timeout=300)
    chosen = [line[7:] for line in r.stdout.splitlines() if line.startswith("PYTHON=")]
    return r.returncode, (chosen[0] if chosen else None), r.stdout + r.stderr


def test_python_when_set_is_used_as_given(tmp_path):
    rc, chosen, _ = jb_python(tmp_path, PYTHON=sys.executable)
    assert rc == 0 and chosen == sys.executable
    assert not (tmp_path / ".venv").exists()
    rc, _, out = jb_python(tmp_path, PYTHON="no-such-python-here")
    assert rc == 1 and "PYTHON=no-such-python-here not found" in out


def test_without_python_one_project_venv_is_made_once_and_reused(tmp_path):
    rc, chosen, out = jb_python(tmp_path)
    venv_python = str(tmp_path / ".venv" / "bin" / "python")
    assert rc == 0 and chosen == venv_python, out
    assert "creating the project venv .venv (python3 -m venv" in out
    made = (tmp_path / ".venv" / "pyvenv.cfg").stat().st_mtime_ns
    rc, chosen, out = jb_python(tmp_path, VIRTUAL_ENV="/somewhere/else")
    assert rc == 0 and chosen == venv_python and "creating" not in out
    assert (tmp_path / ".venv" / "pyvenv.cfg").stat().st_mtime_ns == made
    assert "the active environment /somewhere/else is not installed into" in out
    rc, chosen, _ = jb_python(tmp_path, JITBRIDGE_VENV=str(tmp_path / "other-venv"))
    assert rc == 0 and chosen == str(tmp_path / "other-venv" / "bin" / "python")


def test_a_broken_project_venv_is_named_with_the_fix(tmp_path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text("#!/no/such/interpreter\n")
    (tmp_path / ".venv" / "bin" / "python").chmod(0o755)
    rc, _, out = jb_python(tmp_path)
    assert rc == 1 and "does not run" in out and "remove it and run again" in out


SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(not Path(SYSTEM_PYTHON).exists() or shutil.which("cmake") is None or subprocess.run(
    [SYSTEM_PYTHON, "-c", "import sys, sysconfig, os; sys.exit(not os.path.isfile(os.path.join("
                          "sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"]).returncode != 0
    or subprocess.run([SYSTEM_PYTHON, "-c", "import pybind11, numpy, pytest, matplotlib, IPython"],
                      capture_output=True).returncode == 0,
    reason="needs an externally managed (PEP 668) /usr/bin/python3 that lacks a package scripts/setup installs")
def test_setup_refuses_a_system_python_named_by_python_with_the_fix(tmp_path):
    env = dict(os.environ, PYTHON=SYSTEM_PYTHON, JITBRIDGE_BUILD_DIR=str(tmp_path / "build"))
    r = subprocess.run(["bash", str(ROOT / "scripts" / "setup")], capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=300)
    assert r.returncode == 1
    assert (f"PYTHON={SYSTEM_PYTHON} is a system Python that pip does not install into (PEP 668, externally "
            "managed): unset PYTHON to use the project venv (.venv), or set PYTHON to a venv's python") in r.stderr
    assert not (tmp_path / "build").exists()
