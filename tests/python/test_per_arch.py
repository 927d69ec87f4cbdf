"""Every architecture, compile side (no GPU): fat binaries for a list of targets (compile(arch=[...]) and the CLI's
--arch a,b -o x.fatbin) and their argument checks, nvFatbin's absence, and the request a default-arch program keeps
so that kernels can build for each GPU's architecture. Launching per architecture is tests/python/test_per_arch_gpu.py.

nvFatbin (the nvidia-nvfatbin wheel) is not part of this machine's toolkit: the tests that join images run only where
it is found (JITBRIDGE_NVFATBIN, the wheel, a toolkit); the refusals run everywhere.
"""

import pickle
import struct

import pytest

import jitbridge

SOURCE = r"""
template <class T> __global__ void scale(T* x, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
extern "C" __global__ void fill(int* out, int value) { out[threadIdx.x] = value; }
"""
FATBIN_MAGIC = 0xBA55ED50


def _fatbin_or_skip(**kwargs):
    try:
        return jitbridge.compile(SOURCE, **kwargs)
    except jitbridge.CudaNotFoundError as e:
        assert "nvidia-nvfatbin" in str(e) or "JITBRIDGE_NVFATBIN" in str(e)
        pytest.skip(f"nvFatbin is not available here: {e}")


@pytest.mark.parametrize("arch, error, match", [
    ([], ValueError, r"arch: the list of targets is empty"),
    (["sm_90", "sm_90"], ValueError, r"arch: 'sm_90' is listed twice"),
    (["sm_80", "sm_9"], ValueError, r"arch: 'sm_9' is not a CUDA target"),
    (["sm_80", 90], TypeError, r"arch\[1\]: expected str, got int"),
    ("sm_80,sm_90", ValueError, r"arch: 'sm_80,sm_90' is not a CUDA target"),
    (80, TypeError, r"arch: expected str, a list of str or None, got int"),
])
def test_bad_target_lists_are_refused_before_anything_compiles(arch, error, match):
    with pytest.raises(error, match=match):
        jitbridge.compile(SOURCE, arch=arch)


def test_missing_nvfatbin_names_the_wheel_or_the_setting(run_python):
    code = ("import jitbridge\n"
            "try:\n"
            "    jitbridge.compile('__global__ void k() {}', arch=['sm_80', 'sm_90'])\n"
            "except jitbridge.CudaNotFoundError as e:\n"
            "    print('refused:', e)\n")
    r = run_python(code, JITBRIDGE_NVFATBIN="/nonexistent/libnvfatbin.so.13")
    assert r.returncode == 0, r.stderr
    assert "refused: nvFatbin could not be loaded: JITBRIDGE_NVFATBIN=/nonexistent/libnvfatbin.so.13: no such file" \
        in r.stdout


def test_fat_binary_holds_each_target_and_the_first_targets_signatures():
    program = _fatbin_or_skip(arch=["sm_80", "sm_90", "compute_90"], name_expressions=["scale<float>"])
    magic, version, header = struct.unpack_from("<IHH", program.fatbin)
    assert (magic, version, header) == (FATBIN_MAGIC, 1, 16)
    assert program.arch == "sm_80,sm_90,compute_90"
    assert program.cubin == b"" and program.ptx == ""
    single = jitbridge.compile(SOURCE, arch="sm_80", name_expressions=["scale<float>"])
    assert [(k.name, str(k.signature)) for k in program.kernels] == [(k.name, str(k.signature)) for k in single.kernels]
    # Each target's cubin is inside (uncompressed or not, the fat binary is larger than any one of them).
    assert len(program.fatbin) > len(single.cubin)
    # Pickled, it builds the same list again.
    again = pickle.loads(pickle.dumps(program))
    assert again.arch == program.arch and again._request["arch"] == "sm_80,sm_90,compute_90"


def test_cli_writes_a_fat_binary(cli, tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    r = cli("compile", "k.cu", "--arch", "sm_80,sm_90", "-o", "k.fatbin")
    if r.returncode != 0 and "nvFatbin was not found" in r.stderr:
        pytest.skip("nvFatbin is not available here")
    assert r.returncode == 0, r.stderr
    assert "for sm_80,sm_90" in r.stdout and "wrote k.fatbin" in r.stdout
    assert struct.unpack_from("<I", (tmp_path / "k.fatbin").read_bytes())[0] == FATBIN_MAGIC


def test_cli_writes_a_cubin_and_reports_missing_nvfatbin(cli, tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    r = cli("compile", "k.cu", "--arch", "sm_80", "-o", "k.cubin")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"
    r = cli("compile", "k.cu", "--arch", "sm_80,sm_90", "-o", "k.fatbin", JITBRIDGE_NVFATBIN="/nonexistent")
    assert r.returncode == 1 and "JITBRIDGE_NVFATBIN=/nonexistent: no such file" in r.stderr
    assert not (tmp_path / "k.fatbin").exists()


def test_default_arch_programs_keep_a_request_to_build_other_architectures():
    default = jitbridge.compile(SOURCE)
    request = default._request
    assert request["arch"] is None and request["code"] == SOURCE.encode()
    # What a GPU of another architecture gets: the same request, built for its own target, same signatures.
    other = jitbridge.compile(request["code"], arch="sm_80")
    assert [(k.name, str(k.signature)) for k in other.kernels] == [(k.name, str(k.signature)) for k in default.kernels]
