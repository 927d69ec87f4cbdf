"""test_compile_warnings.py — NVRTC's warnings reach Python as jitbridge.CompileWarning: once per compiled program, not
on cache hits unless JITBRIDGE_COMPILE_WARNINGS=always, never with JITBRIDGE_COMPILE_WARNINGS=0; filterable like any
warning; the CLI prints the log itself instead (no GPU needed)."""

import uuid
import warnings

import pytest

import jitbridge


def warning_source():
    # A fresh source each time, so that the first compile is NVRTC's, not the cache's.
    return (f"// {uuid.uuid4()}\n"
            'extern "C" __global__ void k(int* p) {\n  int unused_here = 1;\n  p[0] = 0;\n}\n')


def caught(call):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        result = call()
    return result, [w for w in got if issubclass(w.category, jitbridge.CompileWarning)]


def test_a_warning_is_issued_once_per_compiled_program_pointing_at_the_caller():
    src = warning_source()
    program, got = caught(lambda: jitbridge.compile(src, arch="sm_90"))
    assert program.origin == "compiled" and len(got) == 1
    message = str(got[0].message)
    assert message.startswith("kernel.cu: NVRTC warnings:\nkernel.cu(3): warning #177-D: variable \"unused_here\" "
                              "was declared but never referenced")
    assert got[0].filename == __file__  # stacklevel: the user's call, not jitbridge's code
    again, got = caught(lambda: jitbridge.compile(src, arch="sm_90"))
    assert again.origin == "memory" and got == []


@pytest.mark.parametrize("make", [
    lambda src: jitbridge.RawKernel(src, "k", arch="sm_90"),
    lambda src: jitbridge.RawModule(code=src, arch="sm_90"),
])
def test_rawkernel_and_rawmodule_issue_it_too(make):
    _, got = caught(lambda: make(warning_source()))
    assert len(got) == 1 and got[0].filename == __file__


def test_a_clean_program_issues_none():
    _, got = caught(lambda: jitbridge.compile(f"// {uuid.uuid4()}\n" 'extern "C" __global__ void k(int* p) {}\n',
                                              arch="sm_90"))
    assert got == []


def test_the_environment_asks_for_them_on_cache_hits_or_turns_them_off(monkeypatch):
    src = warning_source()
    caught(lambda: jitbridge.compile(src, arch="sm_90"))
    monkeypatch.setenv("JITBRIDGE_COMPILE_WARNINGS", "always")
    program, got = caught(lambda: jitbridge.compile(src, arch="sm_90"))
    assert program.origin == "memory" and len(got) == 1
    monkeypatch.setenv("JITBRIDGE_COMPILE_WARNINGS", "0")
    _, got = caught(lambda: jitbridge.compile(warning_source(), arch="sm_90"))
    assert got == []


def test_filters_silence_or_escalate_them():
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=jitbridge.CompileWarning)
        with pytest.raises(jitbridge.CompileWarning, match="unused_here"):
            jitbridge.compile(warning_source(), arch="sm_90")
    assert issubclass(jitbridge.CompileWarning, UserWarning)
    assert "CompileWarning" in jitbridge.__all__ and jitbridge.CompileWarning.__module__ == "jitbridge"


def test_the_cli_prints_the_log_once_and_no_python_warning(cli, tmp_path):
    src = tmp_path / "w.cu"
    src.write_text(warning_source())
    r = cli("compile", src, "--arch", "sm_90")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count('variable "unused_here" was declared but never referenced') == 1
    assert "CompileWarning" not in r.stderr
