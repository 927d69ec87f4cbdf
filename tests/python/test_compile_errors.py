"""test_compile_errors.py — errors that teach: template kernels asked for by their bare name, failing name
expressions, errors in headers, a bare str where a list belongs in every entry point, and error messages that never
echo a huge source (no GPU needed)."""

import pytest

import jitbridge
from jitbridge.ipython import MagicArgumentError, cuda_kernel_magic

SRC = 'extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) { y[0] = a * x[0]; }\n'
TEMPLATE = "template <typename T, int N>\n__global__ void scale(T* x, T a) { x[N] *= a; }\n"
BIG = "// " + "x" * (1 << 20) + "\n"  # a 1 MB source (one long comment line)
MAX_MESSAGE = 2000


# ---- template kernels and name expressions ---------------------------------------------------

def test_a_template_kernel_asked_for_by_its_bare_name_shows_the_name_expression_to_pass():
    with pytest.raises(KeyError) as info:
        jitbridge.RawKernel(TEMPLATE, "scale", arch="sm_90")
    msg = info.value.args[0]
    assert "no kernel 'scale' in the program; it has: none" in msg
    assert "'scale' is a template kernel (template <typename T, int N>)" in msg
    assert "RawKernel(code, 'scale<float, 1>', name_expressions=['scale<float, 1>'])" in msg
    # The suggestion works as written.
    k = jitbridge.RawKernel(TEMPLATE, "scale<float, 1>", name_expressions=["scale<float, 1>"], arch="sm_90")
    assert str(k.signature) == "(float*, float)"
    p = jitbridge.compile(TEMPLATE, arch="sm_90")
    assert p.templates == (("scale", "template <typename T, int N>", "scale<float, 1>"),)
    with pytest.raises(KeyError, match="is a template kernel"):
        p.kernel("scale")
    with pytest.raises(KeyError, match="is a template kernel"):
        jitbridge.RawModule(code=TEMPLATE, arch="sm_90").get_function("scale")


def test_a_failing_name_expression_is_reported_against_the_expression_written():
    with pytest.raises(jitbridge.CompileError) as info:
        jitbridge.compile(TEMPLATE, name_expressions=["scale<float, 1>", "scale<flaot, 2>"], arch="sm_90")
    e = info.value
    assert e.name_expression == 1
    assert e.message == "name_expressions[1] 'scale<flaot, 2>': identifier \"flaot\" is undefined"
    assert str(e).startswith("kernel.cu: error: name_expressions[1] 'scale<flaot, 2>': identifier \"flaot\"")
    for generated in ("__jitbridge", "nv_mangled_name", "__nv_name_map"):
        assert generated not in str(e)
    assert e.line is None and e.source_line is None


def test_an_error_in_a_header_names_the_header_and_its_line():
    header = "// line 1\n// line 2\n// line 3\n// line 4\n__device__ int f() { return nope; }\n"
    with pytest.raises(jitbridge.CompileError) as info:
        jitbridge.compile('#include "h.h"\nextern "C" __global__ void k(int* x) { x[0] = f(); }\n',
                          headers={"h.h": header}, arch="sm_90")
    e = info.value
    assert (e.file, e.line) == ("h.h", 5)
    assert str(e).startswith("h.h:5:")
    assert "kernel.cu:" not in str(e).partition("\n")[0]


def test_standard_headers_compile_in_pasted_code_and_can_be_turned_off(tmp_path):
    src = ("#include <type_traits>\n#include <cstdint>\n#include <limits>\n#include <cmath>\n#include <stdio.h>\n"
           "static_assert(std::is_same<std::uint32_t, unsigned int>::value, \"\");\n"
           'extern "C" __global__ void k(float* x) { x[0] = std::numeric_limits<float>::max() + std::sqrt(x[1]); '
           'printf("%f\\n", x[0]); }\n')
    assert jitbridge.compile(src, arch="sm_90").kernel("k")
    with pytest.raises(jitbridge.CompileError, match="type_traits"):
        jitbridge.compile(src, options=["-DJITBRIDGE_NO_STD_SHIMS"], arch="sm_90")
    # A user's own header of the same name wins.
    (tmp_path / "cstdint").write_text("#pragma once\n#define MY_CSTDINT 1\n")
    mine = "#include <cstdint>\nstatic_assert(MY_CSTDINT == 1, \"\");\nextern \"C\" __global__ void k() {}\n"
    assert jitbridge.compile(mine, include_paths=[tmp_path], arch="sm_90").kernel("k")


def test_a_device_side_launch_without_rdc_says_to_add_it():
    src = "__global__ void child() {}\n__global__ void parent() { child<<<1, 1>>>(); }\n"
    with pytest.raises(jitbridge.CompileError, match=r"options=\('-rdc=true',\)"):
        jitbridge.compile(src, arch="sm_90")


# ---- a bare str where a sequence belongs -------------------------------------------------------

@pytest.mark.parametrize("argument", ["options", "name_expressions", "include_paths"])
def test_a_bare_str_is_refused_by_every_compiling_entry_point(argument):
    # The message shows the one-item tuple meant.
    want = rf"^{argument}: expected a sequence of str( or os.PathLike)?, got str; for one item write a tuple or " \
           rf"list: {argument}=\('-DX=1',\)$"
    with pytest.raises(TypeError, match=want):
        jitbridge.compile(SRC, arch="sm_90", **{argument: "-DX=1"})
    with pytest.raises(TypeError, match=want):
        jitbridge.RawKernel(SRC, "saxpy", arch="sm_90", **{argument: "-DX=1"})
    with pytest.raises(TypeError, match=want):
        jitbridge.RawModule(code=SRC, arch="sm_90", **{argument: "-DX=1"})
    with pytest.raises(TypeError, match=r"^headers: expected a dict"):
        jitbridge.compile(SRC, headers="h.h", arch="sm_90")


def test_the_magic_passes_lists_and_custom_ops_refuse_a_bare_str():
    ns = {}
    k = cuda_kernel_magic("saxpy --arch sm_90 --quiet -O -DX=1 -O -DY=2", SRC, ns)
    assert "-DX=1" in k.program.options and "-DY=2" in k.program.options
    from jitbridge.torch import Launch, Output, custom_op

    with pytest.raises(TypeError, match=r"inputs= takes a tuple of names, got the str 'x'"):
        custom_op("t::a", inputs="x", outputs={"y": Output(like="x")}, forward=[])
    with pytest.raises(TypeError, match=r"save= takes a tuple of names, got the str 'x'"):
        custom_op("t::b", inputs=("x",), outputs={"y": Output(like="x")}, forward=[], save="x")
    with pytest.raises(TypeError, match=r"Launch: args= takes a tuple .* got the str 'x'"):
        Launch(k, args="x", grid=1, block=1)


# ---- no error message echoes a huge source --------------------------------------------------------

def _message(call):
    with pytest.raises(Exception) as info:  # noqa: B017 - each call's own error type is not the point here
        call()
    return str(info.value)


def _wrong_calls():
    prog = jitbridge.compile(SRC, arch="sm_90")
    kernel = jitbridge.RawKernel(SRC, "saxpy", arch="sm_90")
    module = jitbridge.RawModule(code=SRC, arch="sm_90")
    many = (BIG,) * 10
    calls = {
        "compile positional options": lambda: jitbridge.compile(BIG, ["-DX"]),
        "compile unknown keyword": lambda: jitbridge.compile(BIG, bogus=BIG),
        "compile bad options type": lambda: jitbridge.compile(BIG, options=5),
        "compile error in the source": lambda: jitbridge.compile(BIG + "int broken = ;\n" + BIG, arch="sm_90"),
        "compile error on a 1 MB line": lambda: jitbridge.compile("int e = " + " " * (1 << 20) + ";", arch="sm_90"),
        "RawKernel too many positionals": lambda: jitbridge.RawKernel(BIG, "k", (), None, BIG),
        "RawKernel 1 MB name": lambda: jitbridge.RawKernel(SRC, BIG, arch="sm_90"),
        "RawKernel bad option type": lambda: jitbridge.RawKernel(BIG, "k", options=5),
        "RawModule code and path": lambda: jitbridge.RawModule(BIG, BIG),
        "RawModule 1 MB function name": lambda: module.get_function(BIG),
        "RawModule 1 MB global name": lambda: module.get_global(BIG),
        "Program.kernel": lambda: prog.kernel(BIG, BIG),
        "Program.kernel 1 MB name": lambda: prog.kernel(BIG),
        "Program.lowered_name": lambda: prog.lowered_name(BIG),
        "Program.lowered_name, wrong call": lambda: prog.lowered_name(BIG, BIG),
        "kernel call": lambda: kernel(BIG, BIG, (BIG,)),
        "kernel launch config": lambda: kernel[BIG, BIG](BIG),
        "max_active_blocks_per_sm": lambda: kernel.max_active_blocks_per_sm(BIG, BIG, BIG),
        "suggest_block_size": lambda: kernel.suggest_block_size(BIG, BIG, BIG),
        "kernel_names": lambda: module._module.kernel_names(BIG),
        "magic line": lambda: cuda_kernel_magic(BIG, BIG, {}),
        "magic cell": lambda: cuda_kernel_magic("k --arch sm_90", BIG + "int broken = ;\n", {}),
    }
    from jitbridge.torch import Launch, Output, custom_op, function

    calls.update({
        "custom_op 1 MB name": lambda: custom_op(BIG, inputs=("x",), outputs={"y": Output(like="x")}, forward=[]),
        "custom_op 1 MB input": lambda: custom_op("t::c", inputs=(BIG,), outputs={"y": Output(like="x")}, forward=[]),
        "custom_op 1 MB check": lambda: custom_op("t::d", inputs=("x",), outputs={"y": Output(like="x")},
                                                  forward=[], check=BIG),
        "function 1 MB forward": lambda: function(inputs=("x",), outputs={"y": Output(like="x")}, forward=BIG),
        "Launch 1 MB kernel": lambda: Launch(BIG, args=(), grid=1, block=1),
        "Launch 1 MB grid": lambda: Launch(kernel, args=(), grid=BIG, block=1),
    })
    for name in ("cache_info", "cache_clear", "nvrtc_version", "default_arch", "toolkit_include_dirs", "driver_info",
                 "synchronize", "as_array", "from_ptr", "empty", "zeros", "empty_like"):
        calls[name] = (lambda f: lambda: f(*many, bogus=BIG))(getattr(jitbridge, name))
    return calls


def test_no_public_callable_echoes_a_1mb_argument():
    for name, call in _wrong_calls().items():
        message = _message(call)
        assert len(message) < MAX_MESSAGE, (name, message[:3000])


def test_a_shortened_pybind11_error_still_names_the_signature_and_the_argument_types():
    message = _message(lambda: jitbridge.cache_info(BIG))
    assert "incompatible function arguments" in message
    assert "Invoked with: (str of length 1048580)" in message
    with pytest.raises(TypeError, match=r"takes 1 positional argument but 2 were given"):
        jitbridge.compile(BIG, ["-DX"])
    with pytest.raises(MagicArgumentError, match=r"the line is 1048\d+ characters long \(at most 16384\)"):
        cuda_kernel_magic(BIG, SRC, {})  # refused before shlex, which takes minutes on a megabyte
