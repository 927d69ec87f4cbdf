"""python -m jitbridge: compile, cache info/clear, doctor, and how mistakes are reported (each run a fresh process)."""

import re

import pytest

import jitbridge

SAXPY = r"""
#include "common.h"
extern "C" __global__ void saxpy(const real* x, real* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = SCALE * x[i] + y[i];
}
template <class T, int N> __global__ void scale(T* out, const T* __restrict__ in, T f) {
  int i = threadIdx.x;
  if (i < N) out[i] = in[i] * f;
}
"""

RESOURCES = r"regs=\d+ smem=\d+ lmem=\d+ cmem=\d+ spills=\d+/\d+"


@pytest.fixture
def saxpy(tmp_path):
    """saxpy.cu, which needs common.h from its own directory and -D SCALE=..."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "common.h").write_text("typedef float real;\n")
    path = tmp_path / "src" / "saxpy.cu"
    path.write_text(SAXPY)
    return path


def assert_user_error(r, exit_code=None):
    assert r.returncode != 0
    if exit_code is not None:
        assert r.returncode == exit_code
    assert r.stderr.startswith("jitbridge: error:"), r.stderr
    assert "Traceback" not in r.stderr


def test_compile_lists_kernels_and_the_second_run_comes_from_the_disk_cache(cli, saxpy):
    args = ["compile", saxpy, "--arch", "sm_90", "-D", "SCALE=2.0f", "--name-expression", "scale<float, 4>"]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0] == "saxpy.cu: 2 kernels for sm_90 (compiled)"
    assert re.search(r"^  saxpy\(float const\*, float\*, int\)  " + RESOURCES + "$", first.stdout, re.M), first.stdout
    assert re.search(r"^  scale<float, 4>\(float\*, float const\*, float\)  " + RESOURCES + r"  \[_Z\w+\]$",
                     first.stdout, re.M), first.stdout
    second = cli(*args)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == "saxpy.cu: 2 kernels for sm_90 (from disk cache)"
    assert second.stdout.splitlines()[1:] == lines[1:]


def test_compile_options_include_dirs_and_ptx(cli, saxpy, tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "scale.h").write_text("#define SCALE 3.0f\n")
    src = tmp_path / "one.cu"
    src.write_text('#include "scale.h"\n'
                   'extern "C" __global__ void k(float* x) {\n'
                   "#if __cplusplus >= 201703L\n"
                   "  x[0] = SCALE;\n"
                   "#endif\n"
                   "}\n")
    r = cli("compile", src, "-I", tmp_path / "inc", "--option", "-std=c++17", "--ptx", "--arch=sm_90")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "one.cu: 1 kernel for sm_90 (compiled)"
    assert r.stdout.splitlines()[1].startswith("  k(float*)  regs=")
    assert ".entry k" in r.stdout
    # PTX-only target: no resources to show.
    v = cli("compile", src, "-I", tmp_path / "inc", "--arch", "compute_90")
    assert v.returncode == 0, v.stderr
    assert v.stdout.splitlines() == ["one.cu: 1 kernel for compute_90 (compiled)",
                                     "  k(float*)  resources unknown (PTX only)"]


def test_compile_prints_nvrtc_warnings_on_stderr(cli, tmp_path):
    src = tmp_path / "warn.cu"
    src.write_text('extern "C" __global__ void k() { int unused = 3; }\n')
    r = cli("compile", src, "--arch", "sm_90")
    assert r.returncode == 0, r.stderr
    assert "unused" in r.stderr
    assert "unused" not in r.stdout


def test_cache_info_and_clear(cli, saxpy, cache_dir):
    empty = cli("cache", "info")
    assert empty.returncode == 0, empty.stderr
    assert f"directory: {cache_dir}" in empty.stdout.splitlines()
    assert re.search(r"^entries: +0$", empty.stdout, re.M), empty.stdout
    assert cli("compile", saxpy, "-DSCALE=1", "--arch", "sm_90").returncode == 0
    full = cli("cache", "info")
    assert re.search(r"^entries: +1$", full.stdout, re.M), full.stdout
    size = re.search(r"^size: +(\d+) bytes \(\d+\.\d (KiB|MiB)\)$", full.stdout, re.M)
    assert size and int(size.group(1)) > 1024, full.stdout
    cleared = cli("cache", "clear")
    assert cleared.returncode == 0, cleared.stderr
    assert cleared.stdout.strip() == f"removed 1 entry from {cache_dir}"
    assert re.search(r"^entries: +0$", cli("cache", "info").stdout, re.M)
    assert cli("cache", "clear").stdout.strip() == f"removed 0 entries from {cache_dir}"


def test_doctor_reports_the_setup(cli, cache_dir):
    r = cli("doctor")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    major, minor = jitbridge.nvrtc_version()
    search = jitbridge._core._cuda_search()
    assert re.search(rf"^NVRTC: +{re.escape(search['nvrtc']['path'])} \({major}\.{minor}, from "
                     rf"{re.escape(search['nvrtc']['rule'])}\)$", out, re.M), out
    assert re.search(r"^CUDA headers: +/\S+ \(from .+\)$", out, re.M), out
    assert re.search(r"^status: +ok: NVRTC and the CUDA headers are usable$", out, re.M), out
    info = jitbridge.driver_info()
    driver = re.search(r"^driver: +(.*)$", out, re.M)
    assert driver, out
    if info["found"]:
        assert driver.group(1).startswith("CUDA "), out
        for d in info["devices"]:
            assert re.search(rf"^GPU {d['ordinal']}: .*compute capability {re.escape(d['compute_capability'])}", out,
                             re.M), out
    else:
        assert driver.group(1) == f"not found: {info['reason']}", out
        assert re.search(r"^GPUs: +none$", out, re.M), out
    assert re.search(rf"^default arch: +{jitbridge.default_arch()} ", out, re.M), out
    assert re.search(r"^include dirs: +/", out, re.M), out
    assert re.search(rf"^cache: +{re.escape(str(cache_dir))} \(disk, 0 entries, 0 bytes\)$", out, re.M), out


def test_version_and_help(cli):
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"jitbridge {jitbridge.__version__}"
    h = cli("compile", "--help")
    assert h.returncode == 0 and "--name-expression" in h.stdout


def test_missing_file(cli, tmp_path):
    r = cli("compile", tmp_path / "nope.cu")
    assert_user_error(r, 1)
    assert "nope.cu" in r.stderr and "No such file" in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_unknown_command_line_option(cli, saxpy):
    r = cli("compile", saxpy, "--bogus")
    assert_user_error(r, 2)
    assert "--bogus" in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_missing_command(cli):
    assert_user_error(cli(), 2)
    assert_user_error(cli("cache"), 2)


def test_unknown_nvrtc_option(cli, saxpy):
    r = cli("compile", saxpy, "-DSCALE=1", "--option=--no-such-option", "--arch", "sm_90")
    assert_user_error(r, 1)
    assert "--no-such-option" in r.stderr


def test_compile_error_shows_the_diagnostic(cli, saxpy):
    r = cli("compile", saxpy, "--arch", "sm_90")  # SCALE is not defined
    assert_user_error(r, 1)
    assert r.stderr.splitlines()[0] == "jitbridge: error: saxpy.cu did not compile"
    assert "saxpy.cu:5:21: error:" in r.stderr and "SCALE" in r.stderr
    assert "\n 5 |   if (i < n) y[i] = SCALE * x[i] + y[i];\n   |                     ^" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("arch", ["sm90", "sm_12345"])
def test_bad_arch(cli, saxpy, arch):
    r = cli("compile", saxpy, "-DSCALE=1", "--arch", arch)
    assert_user_error(r, 1)
    assert arch in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_bad_define(cli, saxpy):
    assert_user_error(cli("compile", saxpy, "-D", "=1"), 1)


def test_unusable_cache_directory_is_a_warning_not_an_error(cli, saxpy, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    r = cli("compile", saxpy, "-DSCALE=1", "--arch", "sm_90", JITBRIDGE_CACHE_DIR=not_a_dir)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("jitbridge: warning: kernel cache directory"), r.stderr
    assert "Traceback" not in r.stderr
    assert r.stdout.startswith("saxpy.cu: 1 kernel for sm_90 (compiled)")


def test_a_file_without_kernels_is_an_error_that_says_why(cli, tmp_path):
    none = tmp_path / "none.cu"
    none.write_text("__device__ int helper(int x) { return x + 1; }\n")
    r = cli("compile", none, "--arch", "sm_90")
    assert_user_error(r, 1)
    assert "none.cu has no kernels (no __global__ function)" in r.stderr
    assert r.stdout == ""
    only_templates = tmp_path / "templ.cu"
    only_templates.write_text("template <typename T, int N> __global__ void scale(T* x) { x[N] *= 2; }\n")
    r = cli("compile", only_templates, "--arch", "sm_90")
    assert_user_error(r, 1)
    assert "templ.cu has no kernels (only template kernels, none instantiated)" in r.stderr
    assert ("'scale' is a template kernel (template <typename T, int N>): compile an instance with "
            "--name-expression 'scale<float, 1>'") in r.stderr
    r = cli("compile", only_templates, "--arch", "sm_90", "--name-expression", "scale<float, 1>")
    assert r.returncode == 0, r.stderr
    assert "1 kernel for sm_90" in r.stdout and "scale<float, 1>" in r.stdout
