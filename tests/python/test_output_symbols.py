"""The bytes users are handed (Program.cubin/.ptx/.link_input, the CLI's -o and --ptx) hold only the source's own
symbols: compile() appends a layout probe (__jitbridge_layout & co.) to learn parameter types, and that binary is
the one launched; what users get is built once more without it, through the cache, only when asked (issue 24)."""

import re
import uuid

import pytest

import jitbridge

# A struct parameter, a C++ (mangled) kernel, an extern "C" one and a template instantiated by name expression:
# each gets a probe instance in the launched binary.
SOURCE = r"""
struct P { float a; int b; };
extern "C" __global__ void scale(float* x, P p, int n) { int i = threadIdx.x; if (i < n) x[i] *= p.a; }
namespace ns { __global__ void fill(double* x, long n) { if (threadIdx.x < n) x[threadIdx.x] = 1.0; } }
template <class T> __global__ void tk(T* x) { x[0] = T(1); }
"""
NAMES = ("tk<float>",)
INTERNAL = b"__jitbridge"


def fresh(text=SOURCE):
    """The source with a comment no other test compiles, so that the first compile really runs NVRTC."""
    return f"// {uuid.uuid4()}\n{text}"


def entries(ptx):
    return sorted(re.findall(r"^\.(?:visible|weak) \.entry (\w+)\(", ptx, re.M))


def test_program_bytes_have_no_probe_but_the_kernels_keep_their_signatures():
    p = jitbridge.compile(fresh(), arch="sm_90", name_expressions=NAMES, ptx=True)
    assert {k.name: str(k.signature) for k in p.kernels} == {
        "scale": "(float*, P, int)", "ns::fill": "(double*, long)", "tk<float>": "(float*)"}
    assert p.cubin.startswith(b"\x7fELF") and INTERNAL not in p.cubin
    assert INTERNAL.decode() not in p.ptx and not re.search(r"^\.global ", p.ptx, re.M)  # the probe's globals
    assert entries(p.ptx) == sorted(k.lowered_name for k in p.kernels)
    for k in p.kernels:
        assert k.lowered_name.encode() in p.cubin


@pytest.mark.parametrize("option, kind", [("-rdc=true", "cubin"), ("-dc", "cubin"), ("-dlto", "ltoir")])
def test_relocatable_outputs_have_no_probe(option, kind):
    p = jitbridge.compile(fresh(), arch="sm_90", name_expressions=NAMES, options=(option,))
    assert p.link_input_kind == kind and p.link_input
    assert INTERNAL not in p.link_input
    assert INTERNAL not in p.cubin
    assert {k.name: str(k.signature) for k in p.kernels}["scale"] == "(float*, P, int)"


def test_the_probe_free_build_runs_only_when_asked_and_once():
    source = fresh()
    before = jitbridge.cache_info()["compiles"]
    p = jitbridge.compile(source, arch="sm_90", ptx=True)
    assert [k.signature for k in p.kernels if k.name == "scale"]
    assert jitbridge.cache_info()["compiles"] == before + 1  # compiling and finding kernels: one NVRTC run
    first = p.ptx
    assert jitbridge.cache_info()["compiles"] == before + 2  # the output: one more, on first use
    assert p.ptx == first and INTERNAL.decode() not in p.cubin.decode("latin-1")
    again = jitbridge.compile(source, arch="sm_90", ptx=True)
    assert again.ptx == first
    assert jitbridge.cache_info()["compiles"] == before + 2  # both builds come from the cache now


def test_a_virtual_target_gives_probe_free_ptx():
    p = jitbridge.compile(fresh(), arch="compute_90")
    assert p.cubin == b"" and ".entry scale(" in p.ptx and INTERNAL.decode() not in p.ptx


def test_cli_output_files_and_ptx_have_no_probe(cli, tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(SOURCE)
    for run in range(2):  # the second from the disk cache, output included
        r = cli("compile", src, "--arch", "sm_90", "--name-expression", NAMES[0], "-o", "k.cubin", "--ptx")
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[0] == ("k.cu: 3 kernels for sm_90 " + ("(compiled)" if run == 0 else
                                                                           "(from disk cache)"))
        assert "scale(float*, P, int)" in r.stdout and ".entry scale(" in r.stdout
        assert "__jitbridge" not in r.stdout
        cubin = (tmp_path / "k.cubin").read_bytes()
        assert cubin.startswith(b"\x7fELF") and INTERNAL not in cubin and b"scale" in cubin
    v = cli("compile", src, "--arch", "compute_90", "-o", "k.ptx")
    assert v.returncode == 0, v.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    assert ".entry scale(" in ptx and "__jitbridge" not in ptx


@pytest.mark.parametrize("flag", ["-dc", "-dlto"])
def test_linked_programs_hold_no_probe_and_keep_the_signatures(flag):
    caller = fresh(r"""
extern __device__ float scale_of(float x, int k);
__global__ void apply(const float* in, float* out, int n, int k) { out[threadIdx.x] = scale_of(in[threadIdx.x], k); }
""")
    callee = fresh("__device__ float scale_of(float x, int k) { return x * (float)k; }\n")
    programs = [jitbridge.compile(s, arch="sm_90", options=(flag,)) for s in (caller, callee)]
    before = jitbridge.cache_info()
    linked = jitbridge.link(*programs)
    assert jitbridge.cache_info()["links"] == before["links"] + 1  # the link launches use: the programs as compiled
    assert linked.linked and linked.cubin.startswith(b"\x7fELF")
    assert INTERNAL not in linked.cubin
    assert {k.name: str(k.signature) for k in linked.kernels} == {"apply": "(float const*, float*, int, int)"}
    after = jitbridge.cache_info()  # the cubin: each program once more without the probe, and their link
    assert (after["compiles"], after["links"]) == (before["compiles"] + 2, before["links"] + 2)
    again = jitbridge.link(*programs)  # hits, both the link and, for its cubin, the probe-free one
    assert again.cubin == linked.cubin
    assert jitbridge.cache_info() == after
