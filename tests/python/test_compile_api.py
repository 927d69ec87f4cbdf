"""jitbridge.compile() and what it returns: kernels, signatures, resources, errors, argument checks, the cache, the environment."""

import gc
import os
import pickle
import re
import threading
import time
import uuid
from pathlib import Path

import pytest

import jitbridge

ISSUE_KERNEL = r"""
#include <cuda_fp16.h>
typedef float real;
#define RESTRICT __restrict__
struct Params { double scale; char flag; };
extern "C" __global__ void __launch_bounds__(256)
kernel(const real* RESTRICT a, __half* b, int n, Params p, unsigned long long m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = __float2half(a[i] * (float)p.scale + (float)m);
}
"""

TEMPLATE_KERNEL = r"""
template <class T, int N> __global__ void scale(T* out, const T* __restrict__ in, T factor) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) out[i] = in[i] * factor;
}
"""

BROKEN = (
    'extern "C" __global__ void ok(float* x) { x[0] = 1; }\n'
    'extern "C" __global__ void broken(float* x, int n) {\n'
    "  int i = threadIdx.x;\n"
    "  if (i < n) x[i] = undefined_thing(x[i]);\n"
    "}\n"
)


def unique(source):
    """`source` with a comment that makes it a cache miss."""
    return f"// {uuid.uuid4()}\n{source}"


# ---- kernels and signatures -----------------------------------------------------------------

def test_param_dtype_lanes_rank_of_vectors_views_and_chars():
    p = jitbridge.compile(r'''
#include <cuda_bf16.h>
#include <jitbridge/tensor.cuh>
extern "C" __global__ void k(float4* v, jitbridge::Tensor<const __nv_bfloat16, 3> t, char* c, void* raw, bool b,
                             double2 z) {}
''', arch="sm_90")
    sig = p.kernel("k").signature
    assert [(x.dtype, x.lanes, x.rank, x.element_const) for x in sig] == [
        ("float32", 4, 0, False), ("bfloat16", 1, 3, True), (None, 1, 0, False), (None, 1, 0, False),
        ("bool", 1, 0, False), ("complex128", 1, 0, False)]


def test_issue_kernel_signature_params_and_binary():
    p = jitbridge.compile(ISSUE_KERNEL, arch="sm_90")
    assert isinstance(p, jitbridge.Program)
    assert p.arch == "sm_90"
    assert isinstance(p.cubin, bytes) and p.cubin[:4] == b"\x7fELF"
    assert p.ptx == ""  # only kept on request
    assert "-arch=sm_90" in p.options and isinstance(p.options, tuple)
    assert len(p.kernels) == 1 and isinstance(p.kernels, tuple)
    k = p.kernels[0]
    assert isinstance(k, jitbridge.Kernel)
    assert (k.name, k.lowered_name) == ("kernel", "kernel")
    sig = k.signature
    assert isinstance(sig, jitbridge.Signature)
    assert str(sig) == "(float const*, __half*, int, Params, unsigned long long)"
    assert len(sig) == 5
    params = sig.params
    assert isinstance(params, tuple) and all(isinstance(x, jitbridge.Param) for x in params)
    assert [x.kind for x in sig] == ["pointer", "pointer", "value", "value", "value"]
    assert [x.type for x in sig] == ["float", "__half", "int", "Params", "unsigned long long"]
    assert [x.is_const for x in sig] == [True, False, False, False, False]
    assert (sig[3].size, sig[3].align) == (16, 8)
    assert sig[-1].size == 8 and sig[-1].spelling == "unsigned long long"
    assert sig[0].spelling == "float const*" and sig[0].size == 8
    assert [x.type for x in sig[1:3]] == ["__half", "int"]
    # The dtypes launches check, from the core's one type table.
    assert [x.dtype for x in sig] == ["float32", "float16", "int32", None, "uint64"]
    assert [x.element_const for x in sig] == [True, False, False, False, False]
    assert [(x.lanes, x.rank) for x in sig] == [(1, 0)] * 5
    with pytest.raises(IndexError):
        sig[5]
    assert repr(sig[0]) == "<Param pointer float const* size=8 align=8>"
    assert re.fullmatch(r"<Kernel kernel\(float const\*, __half\*, int, Params, unsigned long long\) regs=\d+>",
                        repr(k))
    assert p.kernel("kernel").lowered_name == "kernel"


def test_resources_come_from_ptxas():
    p = jitbridge.compile(ISSUE_KERNEL, arch="sm_90")
    r = p.kernels[0].resources
    assert isinstance(r, jitbridge.Resources)
    assert r.known
    assert r.registers > 0
    assert r.const_bytes > 0
    d = r.as_dict()
    assert d == {name: getattr(r, name) for name in (
        "known", "registers", "barriers", "shared_bytes", "local_bytes", "const_bytes",
        "spill_store_bytes", "spill_load_bytes")}
    assert "ptxas info" not in p.log


def test_template_kernels_through_name_expressions():
    p = jitbridge.compile(TEMPLATE_KERNEL, name_expressions=["scale<float, 64>", "scale<double, 8>"], arch="sm_90")
    assert sorted(k.name for k in p.kernels) == ["scale<double, 8>", "scale<float, 64>"]
    f = p.kernel("scale<float, 64>")
    assert f.lowered_name.startswith("_Z")
    assert p.lowered_name("scale<float, 64>") == f.lowered_name
    assert str(f.signature) == "(float*, float const*, float)"
    d = p.kernel("scale<double, 8>")
    assert d.signature[2].type == "double" and d.signature[2].size == 8
    # A kernel can also be looked up by its lowered name.
    assert p.kernel(d.lowered_name).name == "scale<double, 8>"
    with pytest.raises(KeyError, match="not given as a name expression"):
        p.lowered_name("scale<int, 1>")


def test_headers_options_and_include_paths(tmp_path):
    (tmp_path / "extra.h").write_text("typedef short small_t;\n")
    src = r"""
#include "config.h"
#include "extra.h"
extern "C" __global__ void k(float* x, index_t n, small_t s) { if (threadIdx.x < WIDTH) x[threadIdx.x] *= SCALE; }
"""
    p = jitbridge.compile(src, options=["-DWIDTH=3", "-std=c++17"],
                          headers={"config.h": "#define SCALE 2.0f\ntypedef int index_t;\n"},
                          include_paths=[tmp_path], arch="sm_90")
    assert str(p.kernel("k").signature) == "(float*, int, short)"
    assert "-DWIDTH=3" in p.options
    assert f"-I{tmp_path}" in p.options
    # bytes work as header text and as the source
    p2 = jitbridge.compile(src.encode(), options=("-DWIDTH=3",), headers={"config.h": b"#define SCALE 1.0f\ntypedef long index_t;\n"},
                           include_paths=(str(tmp_path),), arch="sm_90")
    assert str(p2.kernel("k").signature) == "(float*, long, short)"


def test_ptx_on_request_and_virtual_targets():
    p = jitbridge.compile('extern "C" __global__ void k(int* x) { *x = 1; }', arch="sm_90a", ptx=True)
    assert p.arch == "sm_90a"
    assert p.cubin
    assert ".entry k" in p.ptx
    v = jitbridge.compile('extern "C" __global__ void k(int* x) { *x = 2; }', arch="compute_90")
    assert v.cubin == b""
    assert ".entry k" in v.ptx
    assert str(v.kernels[0].signature) == "(int*)"
    assert not v.kernels[0].resources.known
    assert repr(v.kernels[0]) == "<Kernel k(int*) regs=?>"


def test_kernel_lookup_error_lists_the_kernels():
    p = jitbridge.compile('extern "C" __global__ void first() {}\nextern "C" __global__ void second(int x) {}\n',
                          arch="sm_90")
    assert [k.name for k in p.kernels] == ["first", "second"] or sorted(k.name for k in p.kernels) == ["first", "second"]
    assert len(p.kernel("first").signature) == 0
    with pytest.raises(KeyError) as info:
        p.kernel("third")
    message = str(info.value)
    assert "third" in message and "first" in message and "second" in message
    assert re.fullmatch(r"<Program kernel\.cu for sm_90: 2 kernels \((first, second|second, first)\), \w+>", repr(p))


def test_kernels_keep_their_program_alive():
    p = jitbridge.compile(unique(ISSUE_KERNEL), arch="sm_90")
    kernel = p.kernels[0]
    signature = kernel.signature
    del p
    jitbridge.cache_clear()  # the cache's reference is gone too
    gc.collect()
    assert kernel.name == "kernel"
    assert str(kernel.signature) == "(float const*, __half*, int, Params, unsigned long long)"
    assert signature[3].type == "Params"


def test_warnings_stay_on_the_program():
    with pytest.warns(jitbridge.CompileWarning, match="unused"):  # and reach Python (test_compile_warnings.py)
        p = jitbridge.compile(unique('extern "C" __global__ void k() { int unused = 3; }'), arch="sm_90")
    assert "unused" in p.log


# ---- errors ---------------------------------------------------------------------------------

def test_compile_error_fields_and_caret():
    with pytest.raises(jitbridge.CompileError) as info:
        jitbridge.compile(BROKEN, options=["-DFOO=1"], arch="sm_90", program_name="mine.cu")
    e = info.value
    assert isinstance(e, RuntimeError)
    assert type(e) is jitbridge.CompileError
    assert (e.line, e.column) == (4, 21)
    assert e.kernel == "broken"
    assert e.program_name == "mine.cu"
    assert "undefined_thing" in e.message
    assert e.source_line == "  if (i < n) x[i] = undefined_thing(x[i]);"
    assert "error" in e.log
    assert isinstance(e.options, tuple) and "-DFOO=1" in e.options
    text = str(e)
    assert text.startswith("mine.cu:4:21: error:")
    assert "\n 4 |   if (i < n) x[i] = undefined_thing(x[i]);\n   |                     ^" in text
    # It pickles (multiprocessing workers can send it back).
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is jitbridge.CompileError
    assert (again.line, again.kernel, str(again)) == (4, "broken", text)


def test_unknown_option_is_a_compile_error_without_a_location():
    with pytest.raises(jitbridge.CompileError) as info:
        jitbridge.compile('extern "C" __global__ void k() {}', options=["--no-such-option"], arch="sm_90")
    e = info.value
    assert "--no-such-option" in e.message
    assert e.line is None and e.column is None and e.kernel is None and e.source_line is None


def test_error_classes_are_runtime_errors():
    for cls in (jitbridge.CompileError, jitbridge.NvrtcError, jitbridge.NoDriverError, jitbridge.DriverError):
        assert issubclass(cls, RuntimeError)
        assert cls.__module__ == "jitbridge"
    from jitbridge import _core, _errors
    assert _core.CompileError is _errors.CompileError is jitbridge.CompileError
    assert jitbridge.DriverError("x", code=100).code == 100


@pytest.mark.parametrize("arch, match", [
    ("sm90", "not a CUDA target"),
    ("sm_12345", "cannot build"),
    ("banana", "not a CUDA target"),
])
def test_bad_arch_is_a_value_error(arch, match):
    with pytest.raises(ValueError, match=match):
        jitbridge.compile('extern "C" __global__ void k() {}', arch=arch)


def test_arch_disagreeing_with_option_is_a_value_error():
    with pytest.raises(ValueError, match="disagrees"):
        jitbridge.compile('extern "C" __global__ void k() {}', arch="sm_90", options=["-arch=sm_80"])


@pytest.mark.parametrize("kwargs, message", [
    ({"code": 5}, "code: expected str or bytes, got int"),
    ({"code": None}, "code: expected str or bytes, got NoneType"),
    ({"options": "-DX=1"}, "options: expected a sequence of str, got str; for one item write a tuple or list: "
                           "options=('-DX=1',)"),
    ({"options": b"-DX=1"}, "options: expected a sequence of str, got bytes"),
    ({"options": ["-DX=1", 3]}, "options[1]: expected str, got int"),
    ({"options": {"-DX=1"}}, "options: expected a sequence of str, got set"),
    ({"options": None}, "options: expected a sequence of str, got NoneType"),
    ({"name_expressions": "scale<float, 4>"}, "name_expressions: expected a sequence of str, got str; for one item "
                                             "write a tuple or list: name_expressions=('scale<float, 4>',)"),
    ({"name_expressions": [b"k"]}, "name_expressions[0]: expected str, got bytes"),
    ({"include_paths": "/usr/include"}, "include_paths: expected a sequence of str or os.PathLike, got str; for one "
                                       "item write a tuple or list: include_paths=('/usr/include',)"),
    ({"include_paths": Path("/usr/include")}, "include_paths: expected a sequence of str or os.PathLike, got PosixPath"),
    ({"include_paths": [1]}, "include_paths[0]: expected str, got int"),
    ({"headers": ["a.h"]}, "headers: expected a dict of str (name) to str (text), got list"),
    ({"headers": {"a.h": 1}}, "headers['a.h']: expected str or bytes, got int"),
    ({"headers": {1: "int x;"}}, "headers: names must be str, got int (1)"),
    ({"arch": 90}, "arch: expected str, a list of str or None, got int"),
    ({"ptx": "yes"}, "ptx: expected bool, got str"),
    ({"ptx": 1}, "ptx: expected bool, got int"),
    ({"program_name": None}, "program_name: expected str, got NoneType"),
])
def test_argument_type_errors_name_the_argument(kwargs, message):
    args = {"code": 'extern "C" __global__ void k() {}', **kwargs}
    code = args.pop("code")
    with pytest.raises(TypeError) as info:
        jitbridge.compile(code, **args)
    assert str(info.value) == message


def test_sequences_other_than_lists_are_accepted():
    p = jitbridge.compile('extern "C" __global__ void k(int* x) { *x = N; }', options=(f"-DN={n}" for n in [7]),
                          include_paths=[Path("/tmp")], arch="sm_90")
    assert "-DN=7" in p.options and "-I/tmp" in p.options


def test_options_are_keyword_only_and_nul_is_refused():
    with pytest.raises(TypeError):
        jitbridge.compile('extern "C" __global__ void k() {}', ["-DX=1"])
    with pytest.raises(ValueError, match="options\\[0\\]: contains a NUL"):
        jitbridge.compile('extern "C" __global__ void k() {}', options=["-DX=1\0"])
    with pytest.raises(ValueError, match="program_name"):
        jitbridge.compile('extern "C" __global__ void k() {}', program_name="")


def test_gil_is_released_while_compiling():
    ticks = 0
    stop = threading.Event()

    def ticker():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        time.sleep(0.01)
        start_ticks, start = ticks, time.perf_counter()
        compiles = 0
        while time.perf_counter() - start < 0.2:  # a compile can take only tens of milliseconds
            jitbridge.compile(unique(ISSUE_KERNEL), arch="sm_90")
            compiles += 1
        elapsed, during = time.perf_counter() - start, ticks - start_ticks
    finally:
        stop.set()
        thread.join()
    # The ticker ticks about once a millisecond while the GIL is free. Held throughout each compile,
    # it would get a turn only between compiles: a handful of ticks for the whole loop.
    assert during >= max(20, elapsed * 1000 / 4), (during, elapsed, compiles)


def test_compiles_from_many_threads_at_once():
    from concurrent.futures import ThreadPoolExecutor

    def build(i):
        return jitbridge.compile(unique(f'extern "C" __global__ void k{i}(int* x) {{ *x = {i}; }}'), arch="sm_90")

    with ThreadPoolExecutor(8) as pool:
        programs = list(pool.map(build, range(16)))
    assert [p.kernels[0].name for p in programs] == [f"k{i}" for i in range(16)]
    assert all(p.origin == "compiled" for p in programs)


# ---- the cache ------------------------------------------------------------------------------

def test_cache_info_memory_hits_and_clear():
    info = jitbridge.cache_info()
    assert set(info) == {"directory", "disk", "disk_reason", "trust_group", "entries", "bytes", "memory_entries",
                         "compiles", "links", "lock_waits", "lock_timeouts"}
    assert info["directory"] == os.environ["JITBRIDGE_CACHE_DIR"]
    assert info["disk"] is True
    assert (info["disk_reason"], info["trust_group"]) == ("", None)
    src = unique('extern "C" __global__ void k(float* x) { x[0] = 1; }')
    first = jitbridge.compile(src, arch="sm_90")
    assert (first.origin, first.from_cache) == ("compiled", False)
    second = jitbridge.compile(src, arch="sm_90")
    assert (second.origin, second.from_cache) == ("memory", True)
    after = jitbridge.cache_info()
    assert after["entries"] >= 1 and after["bytes"] > 0 and after["memory_entries"] >= 1
    assert after["compiles"] == info["compiles"] + 1  # the miss ran NVRTC, the memory hit did not
    removed = jitbridge.cache_clear()
    assert removed == after["entries"]
    cleared = jitbridge.cache_info()
    assert (cleared["entries"], cleared["bytes"], cleared["memory_entries"]) == (0, 0, 0)
    assert jitbridge.compile(src, arch="sm_90").origin == "compiled"
    assert jitbridge.cache_info()["compiles"] == info["compiles"] + 2  # counted since start, not reset by clear
    assert jitbridge.cache_clear() == 1
    # The bytes users get: built once more, without the layout probe (test_output_symbols.py), for both.
    assert second.cubin == first.cubin
    assert jitbridge.cache_info()["compiles"] == info["compiles"] + 3


def test_a_user_pch_is_cached_in_memory_and_on_disk_and_writes_no_pch_files(run_python, tmp_path):
    # -pch used to turn caching off; jitbridge now manages the precompiled headers itself (in a private directory)
    # and records the headers they hold, so the result is cached like any other.
    code = ("import jitbridge\n"
            "src = '#include <cuda_fp16.h>\\nextern \"C\" __global__ void k(__half* x) { x[0] = x[1]; }\\n'\n"
            "a = jitbridge.compile(src, options=['-pch'], arch='sm_90')\n"
            "b = jitbridge.compile(src, options=['-pch'], arch='sm_90')\n"
            "print(a.origin, b.origin, 'precompiled' in a.log, str(a.kernels[0].signature))\n")
    first = run_python(code)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["compiled", "memory", "False", "(__half*)"]
    second = run_python(code)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["disk", "memory", "False", "(__half*)"]
    assert list(tmp_path.glob("*.pch")) == []


def test_a_fresh_process_reads_the_disk_cache(run_python, cache_dir):
    code = ("import jitbridge\n"
            "p = jitbridge.compile('extern \"C\" __global__ void k(double* x) { x[0] = 2; }', arch='sm_90')\n"
            "print(p.origin, p.from_cache, str(p.kernels[0].signature))\n")
    first = run_python(code)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["compiled", "False", "(double*)"]
    second = run_python(code)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["disk", "True", "(double*)"]
    assert len(list((cache_dir / "v1").glob("*.jbc"))) == 1


def test_unusable_cache_directory_warns_through_python_warnings(run_python, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    code = ("import warnings, jitbridge\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    p = jitbridge.compile('extern \"C\" __global__ void k() {}', arch='sm_90')\n"
            "print(p.origin)\n"
            "for w in caught: print(w.category.__name__, '|', w.message)\n")
    r = run_python(code, JITBRIDGE_CACHE_DIR=not_a_dir)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "compiled"
    assert any(line.startswith("RuntimeWarning | ") and "unusable" in line and str(not_a_dir) in line
               for line in lines[1:]), r.stdout
    assert "jitbridge: warning" not in r.stderr  # it went through Python, not straight to stderr
    # Warnings turned into errors cannot cross the C++ compile: the message goes to stderr instead.
    strict = run_python("import jitbridge; print(jitbridge.compile('extern \"C\" __global__ void k() {}', "
                        "arch='sm_90').origin)", JITBRIDGE_CACHE_DIR=not_a_dir, PYTHONWARNINGS="error::RuntimeWarning")
    assert strict.returncode == 0, strict.stderr
    assert strict.stdout.strip() == "compiled"
    assert strict.stderr.startswith("jitbridge: warning: kernel cache directory"), strict.stderr


# ---- the environment ------------------------------------------------------------------------

def test_environment_queries():
    major, minor = jitbridge.nvrtc_version()
    assert isinstance(major, int) and isinstance(minor, int) and major >= 12
    assert re.fullmatch(r"(sm|compute)_\d+[af]?", jitbridge.default_arch())
    dirs = jitbridge.toolkit_include_dirs()
    assert dirs and any(os.path.isfile(os.path.join(d, "cuda_fp16.h")) for d in dirs)


def test_driver_info_shape():
    info = jitbridge.driver_info()
    assert set(info) == {"found", "reason", "version", "devices"}
    assert isinstance(info["found"], bool)
    if info["found"]:
        assert info["reason"] is None
        assert isinstance(info["version"], int) and info["version"] >= 12000
        for i, d in enumerate(info["devices"]):
            assert d["ordinal"] == i
            assert re.fullmatch(r"\d+\.\d+", d["compute_capability"])
            assert d["arch"] == "sm_" + d["compute_capability"].replace(".", "")
            assert d["total_memory"] > 0 and d["name"]
    else:
        assert isinstance(info["reason"], str) and info["reason"]
        assert info["version"] is None and info["devices"] == []


def test_default_arch_follows_jitbridge_arch_without_a_gpu(run_python):
    if jitbridge.driver_info()["devices"]:
        pytest.skip("a GPU decides the default arch here")
    r = run_python("import jitbridge; print(jitbridge.default_arch())", JITBRIDGE_ARCH="sm_80")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "sm_80"


def test_public_api():
    assert jitbridge.__version__ == "0.1.0"
    assert jitbridge.__doc__
    for name in jitbridge.__all__:
        assert hasattr(jitbridge, name), name
    assert repr(jitbridge.Program) == "<class 'jitbridge.Program'>"
