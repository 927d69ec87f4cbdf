"""The stream-lifetime state machine (tests/fuzz/python/lifetime_machine.py) on the fake driver: a short run per
seed in CI (a few seconds each); scripts/gpu-lifetimes runs it on the GPU for 100,000 steps and under memcheck.
A crash is the child dying (the fake driver aborts on any call naming a destroyed stream and on a bad free); a
failure is an allocation or stream left at the end."""
from pathlib import Path

import pytest

from fake_driver import run_child

MACHINE = Path(__file__).resolve().parents[1] / "fuzz" / "python" / "lifetime_machine.py"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lifetime_machine_on_the_fake_driver(seed):
    code = f"import runpy, sys; sys.argv = ['lifetime_machine', '--steps', '1500', '--seed', '{seed}']\n" \
           f"runpy.run_path({str(MACHINE)!r}, run_name='__main__')\n"
    out = run_child(code, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("lifetime_machine:") and "failures=0" in line, out.stdout + out.stderr
    assert "dropped_streams=0" not in line and "launches=0" not in line, line   # it did something
