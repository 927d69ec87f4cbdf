"""jitbridge.link and the automatic link of -dc / -rdc / -dlto programs (NVRTC and nvJitLink run without a GPU)."""

import pathlib

import pytest

import jitbridge

PARENT_CHILD = r"""
extern "C" __global__ void child(int* out, int base) { out[threadIdx.x] = base + 3 * (int)threadIdx.x; }
extern "C" __global__ void parent(int* out, int base) { if (threadIdx.x == 0) child<<<1, 32>>>(out, base); }
"""
CALLER = r"""
extern __device__ float scale_of(float x, int k);
__global__ void apply(const float* in, float* out, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = scale_of(in[i], k);
}
"""
CALLEE = "__device__ float scale_of(float x, int k) { return x * (float)k + 1.0f; }\n"


def build(src, *options):
    return jitbridge.compile(src, options=options, arch="sm_90")


@pytest.mark.parametrize("flag", ["-dc", "-rdc=true", "--relocatable-device-code=true", "--device-c", "-dlto"])
def test_relocatable_programs_are_linked_by_compile(flag):
    p = build(PARENT_CHILD, flag)
    assert p.linked
    assert p.link_input_kind == ("ltoir" if flag == "-dlto" else "cubin")
    assert p.link_input
    assert p.cubin[:4] == b"\x7fELF"
    assert [k.name for k in p.kernels] == ["child", "parent"] or sorted(k.name for k in p.kernels) == ["child", "parent"]
    assert str(p.kernel("parent").signature) == "(int*, int)"


def test_plain_programs_have_nothing_to_link():
    p = build("extern \"C\" __global__ void k(int* p) { *p = 1; }")
    assert not p.linked
    assert p.link_input == b""
    assert p.link_input_kind is None
    with pytest.raises(ValueError, match=r"inputs\[0\]: the program was not compiled for linking"):
        jitbridge.link(p)


@pytest.mark.parametrize("flag", ["-dc", "-dlto"])
def test_link_joins_two_programs(flag):
    caller = build(CALLER, flag)
    assert not caller.linked
    assert "scale_of(float, int)" in caller.log
    callee = build(CALLEE, flag)
    linked = jitbridge.link(caller, callee)
    assert isinstance(linked, jitbridge.Program)
    assert linked.linked
    assert linked.arch == "sm_90"
    assert [k.name for k in linked.kernels] == ["apply"]
    assert str(linked.kernel("apply").signature) == "(float const*, float*, int, int)"
    assert ("-lto" in linked.options) == (flag == "-dlto")
    again = jitbridge.link(caller, callee)
    assert again.origin in ("memory", "disk")
    assert again.cubin == linked.cubin


def test_link_error_names_the_symbol_demangled():
    caller = build(CALLER, "-dc")
    with pytest.raises(jitbridge.LinkError) as info:
        jitbridge.link(caller)
    e = info.value
    assert isinstance(e, RuntimeError)
    assert "undefined reference to `scale_of(float, int)` (_Z8scale_offi)" in str(e)
    assert e.undefined == ("scale_of(float, int)",)
    assert "_Z8scale_offi" in e.error_log
    assert isinstance(e.info_log, str)
    assert e.code != 0


def test_bytes_and_file_inputs(tmp_path):
    caller = build(CALLER, "-dc")
    callee = jitbridge.compile(CALLEE, options=["-dc"], arch="sm_90", ptx=True)
    by_ptx = jitbridge.link(caller, ("ptx", callee.ptx.encode(), "callee.ptx"))
    assert by_ptx.kernel("apply")
    cubin = tmp_path / "callee.cubin"
    cubin.write_bytes(callee.link_input)
    by_path = jitbridge.link(caller, cubin)  # os.PathLike
    assert by_path.kernel("apply")
    assert jitbridge.link(caller, str(cubin)).cubin == by_path.cubin
    lto_callee = build(CALLEE, "-dlto")
    lto = jitbridge.link(build(CALLER, "-dlto"), ("ltoir", lto_callee.link_input))
    assert "-lto" in lto.options


def test_bad_inputs_are_refused_naming_the_argument(tmp_path):
    caller = build(CALLER, "-dc")
    with pytest.raises(ValueError, match="inputs: nothing to link"):
        jitbridge.link()
    with pytest.raises(TypeError, match=r"inputs\[1\]: bytes need a kind"):
        jitbridge.link(caller, b"\x7fELF")
    with pytest.raises(TypeError, match=r"inputs\[1\]: \('ptx', data\) needs data as bytes, got str"):
        jitbridge.link(caller, ("ptx", ".version 9.0"))
    with pytest.raises(ValueError, match=r"inputs\[1\]: unknown kind 'elf'"):
        jitbridge.link(caller, ("elf", b"x"))
    with pytest.raises(ValueError, match=r"inputs\[1\] \(cubin\): empty"):
        jitbridge.link(caller, ("cubin", b""))
    with pytest.raises(TypeError, match=r"inputs\[1\]: expected a Program, a path"):
        jitbridge.link(caller, 42)
    with pytest.raises(TypeError, match=r"inputs\[1\]: expected a \(kind, data\)"):
        jitbridge.link(caller, ("cubin",))
    with pytest.raises(ValueError, match="cannot be read"):
        jitbridge.link(caller, tmp_path / "missing.cubin")
    with pytest.raises(ValueError, match="not known from its extension"):
        jitbridge.link(caller, tmp_path / "x.bin")
    with pytest.raises(ValueError, match="compiled for sm_90, the link is for sm_80"):
        jitbridge.link(caller, arch="sm_80")
    with pytest.raises(ValueError, match="virtual target"):
        jitbridge.link(("ptx", b"x"), arch="compute_90")
    with pytest.raises(TypeError, match="options: expected a sequence of str"):
        jitbridge.link(caller, options="-O3")
    with pytest.raises(TypeError, match="lto: expected bool"):
        jitbridge.link(caller, lto=1)
    with pytest.raises(TypeError, match="device_runtime: expected bool"):
        jitbridge.link(caller, device_runtime="yes")
    lto = build(CALLEE, "-dlto")
    with pytest.raises(ValueError, match="lto: an input is LTO-IR"):
        jitbridge.link(lto, lto=False)
    with pytest.raises(jitbridge.LinkError):
        jitbridge.link(caller, ("cubin", b"garbage"))


def test_device_runtime_can_be_refused():
    p = build(PARENT_CHILD, "-dc")
    with pytest.raises(jitbridge.LinkError, match="device runtime"):
        jitbridge.link(p, device_runtime=False)
    assert jitbridge.link(p, device_runtime=True).kernel("parent")


def test_doctor_reports_the_device_runtime():
    from jitbridge import cli

    report = cli._doctor_report()
    devrt = report["cuda"]["device_runtime"]
    assert set(devrt) >= {"found", "path", "rule", "tried"}
    if devrt["found"]:
        assert pathlib.Path(devrt["path"]).name == "libcudadevrt.a"


def test_an_unknown_linker_option_is_a_link_error():
    caller = build(CALLER, "-dc")
    callee = build(CALLEE, "-dc")
    with pytest.raises(jitbridge.LinkError, match="nvJitLinkCreate failed") as info:
        jitbridge.link(caller, callee, options=["-no-such-option"])
    assert info.value.code == 1  # NVJITLINK_ERROR_UNRECOGNIZED_OPTION
    assert jitbridge.link(caller, callee, options=["-O3"]).kernel("apply")
