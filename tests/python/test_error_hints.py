"""test_error_hints.py — compile errors and argument errors that name the fix (issue 24): a missing header, a missing
'}', standard headers the shims do not cover, M_PI after <cmath>, options="-DX=1", name expressions spelled with other
blanks, an empty source, include paths that are not directories; the CLI's forms of the same (no GPU needed)."""

import os
import re

import pytest

import jitbridge

KERNEL = 'extern "C" __global__ void k(double* p) { p[0] = 1; }\n'


def compile_error(code, **kwargs):
    with pytest.raises(jitbridge.CompileError) as info:
        jitbridge.compile(code, arch="sm_90", **kwargs)
    return info.value


def test_a_missing_header_names_include_paths_and_headers_and_either_fix_works(tmp_path):
    src = '#include "myhelpers.cuh"\n' + KERNEL.replace("1;", "HELPER;")
    e = compile_error(src)
    assert e.message == (
        'cannot open source file "myhelpers.cuh" (NVRTC searches only the directories given with include_paths=[...] '
        '(command line: -I DIR) and the in-memory headers=; pass the directory holding "myhelpers.cuh" as '
        'include_paths=[dir], or its text as headers={"myhelpers.cuh": text})')
    assert str(e).startswith("kernel.cu:1:25: error: " + e.message)
    (tmp_path / "myhelpers.cuh").write_text("#define HELPER 2\n")
    assert jitbridge.compile(src, include_paths=[tmp_path], arch="sm_90").kernel("k")
    assert jitbridge.compile(src, headers={"myhelpers.cuh": "#define HELPER 2\n"}, arch="sm_90").kernel("k")


@pytest.mark.parametrize("header", ["algorithm", "vector", "iostream", "string", "map"])
def test_a_host_standard_header_lists_the_supported_ones_and_says_why(header):
    e = compile_error(f"#include <{header}>\n" + KERNEL)
    assert e.message.startswith(
        f'cannot open source file "{header}" (<{header}> is a header of the host C++ standard library: device code '
        "has no std:: containers, strings, streams or allocation, so NVRTC has no such headers. jitbridge maps these "
        "standard headers onto libcu++: <type_traits>, <cstdint>,")
    for supported in ("<cmath>", "<complex>", "<cfloat>", "<math.h>", "<stdio.h>"):
        assert supported in e.message
    assert e.message.endswith('docs/DESIGN.md, "Standard headers")')


def test_a_standard_header_libcuxx_has_points_at_its_cuda_std_form():
    e = compile_error("#include <optional>\n" + KERNEL)
    assert "libcu++'s own version is there: #include <cuda/std/optional> and use cuda::std::." in e.message
    assert jitbridge.compile("#include <cuda/std/optional>\n" + KERNEL, arch="sm_90").kernel("k")


def test_a_shimmed_header_with_the_shims_off_says_they_are_off():
    e = compile_error("#include <cmath>\n" + KERNEL, options=["-DJITBRIDGE_NO_STD_SHIMS"])
    assert e.message.startswith('cannot open source file "cmath" (a standard header jitbridge maps onto libcu++, '
                                "but not in this compile: -DJITBRIDGE_NO_STD_SHIMS is given")


@pytest.mark.parametrize("header", ["cmath", "math.h"])
def test_m_pi_is_defined_after_cmath_as_after_math_h(header):
    src = f"#include <{header}>\n" + 'extern "C" __global__ void k(double* p) { p[0] = M_PI + M_SQRT2 + M_E; }\n'
    assert jitbridge.compile(src, arch="sm_90").kernel("k")


def test_a_missing_closing_brace_is_the_headline_pointing_at_the_open_one():
    src = 'extern "C" __global__ void k(int* p) {\n  if (p) {\n    p[0] = 1;\n}\n'
    e = compile_error(src)
    assert e.message == 'expected a "}" at the end of the source, to match this "{"'
    assert (e.file, e.line, e.column) == ("kernel.cu", 1, 38)
    assert str(e).splitlines()[:3] == [
        'kernel.cu:1:38: error: expected a "}" at the end of the source, to match this "{"',
        ' 1 | extern "C" __global__ void k(int* p) {',
        "   |                                      ^"]
    assert "without an error line" not in str(e)


def test_a_bare_str_as_options_shows_the_tuple_to_write():
    with pytest.raises(TypeError) as info:
        jitbridge.compile(KERNEL, options="-DX=1", arch="sm_90")
    assert str(info.value) == "options: expected a sequence of str, got str; for one item write a tuple or list: " \
                              "options=('-DX=1',)"
    assert jitbridge.compile(KERNEL, options=("-DX=1",), arch="sm_90").kernel("k")  # the fix, as shown


TEMPLATES = ("template <class T, int N> __global__ void scale(T* x) { x[0] *= N; }\n"
             "template <class T> __global__ void pair(T* x) {}\n"
             "template <class T> struct box { T v; };\n")


@pytest.mark.parametrize("written, asked", [
    ("scale<float, 4>", "scale<float,4>"),
    ("scale<float,4>", "scale< float , 4 >"),
    ("scale<unsigned int, 2>", "scale<unsigned int,2>"),
    ("pair<box<int> >", "pair<box<int>>"),
    ("pair<box<int>>", "pair<box<int> >"),
])
def test_a_name_expression_is_found_however_its_blanks_are_spelled(written, asked):
    p = jitbridge.compile(TEMPLATES, name_expressions=[written], arch="sm_90")
    assert p.kernel(asked).name == written
    assert p.lowered_name(asked) == p.lowered_name(written)
    assert jitbridge.RawModule(code=TEMPLATES, name_expressions=[written], arch="sm_90").get_function(asked).name == \
        written


def test_blanks_between_words_still_matter():
    p = jitbridge.compile(TEMPLATES, name_expressions=["scale<unsigned int, 2>"], arch="sm_90")
    with pytest.raises(KeyError, match="no kernel 'scale<unsignedint, 2>'"):
        p.kernel("scale<unsignedint, 2>")


@pytest.mark.parametrize("code, why", [("", "empty"), (b"", "empty"), (" \n\t\n", "only blanks")])
def test_an_empty_source_is_refused(code, why):
    with pytest.raises(ValueError, match=rf"^code: the source is {why} \(nothing to compile\)$"):
        jitbridge.compile(code, arch="sm_90")
    with pytest.raises(ValueError, match=rf"^code: the source is {why}"):
        jitbridge.RawKernel(code, "k", arch="sm_90")


def test_an_include_path_that_is_not_a_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as info:
        jitbridge.compile(KERNEL, include_paths=[tmp_path, "no/such/dir"], arch="sm_90")
    assert str(info.value) == (f"include_paths[1]: 'no/such/dir' is not a directory (no such directory); relative "
                               f"paths are taken from the current directory, {os.getcwd()}")
    (tmp_path / "h.cuh").write_text("")
    with pytest.raises(ValueError, match=r"^include_paths\[0\]: '.*h.cuh' is not a directory \(it is a file: give "
                                         r"the directory that holds it\)$"):
        jitbridge.compile(KERNEL, include_paths=[tmp_path / "h.cuh"], arch="sm_90")


# ---- the command line --------------------------------------------------------------------------

def test_the_cli_refuses_a_missing_include_dir_and_an_empty_file(cli, tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    r = cli("compile", src, "--arch", "sm_90", "-I", tmp_path / "nope")
    assert r.returncode == 1 and r.stderr == f"jitbridge: error: -I {tmp_path / 'nope'}: no such directory\n"
    r = cli("compile", src, "--arch", "sm_90", "-I", src)
    assert r.returncode == 1 and r.stderr == f"jitbridge: error: -I {src}: a file, not a directory\n"
    empty = tmp_path / "empty.cu"
    empty.write_text("\n")
    r = cli("compile", empty, "--arch", "sm_90")
    assert r.returncode == 1 and r.stderr == f"jitbridge: error: {empty} is empty: nothing to compile\n"


def test_the_cli_says_the_size_it_wrote_once(cli, tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    r = cli("compile", src, "--arch", "sm_90", "-o", tmp_path / "k.cubin")
    assert r.returncode == 0, r.stderr
    size = (tmp_path / "k.cubin").stat().st_size
    line = r.stdout.splitlines()[-1]
    assert re.fullmatch(rf"wrote {re.escape(str(tmp_path / 'k.cubin'))}: {size} bytes( \(\d+\.\d KiB\))?", line), line


def test_messages_name_the_cuda_header_dirs_instead_of_this_machines_paths():
    from jitbridge._richerrors import compile_error_html

    e = compile_error("int x = ;\n", options=["-DX=1"])
    dirs = jitbridge.toolkit_include_dirs()
    assert dirs and all(f"-I{d}" in e.options for d in dirs)  # the field keeps every option NVRTC got
    assert "NVRTC log (options: -DX=1 -arch=sm_90 -Xptxas=-v, plus -I of each of toolkit_include_dirs()):" in str(e)
    html = compile_error_html(e)
    assert "-DX=1 -arch=sm_90 -Xptxas=-v, plus -I of each of toolkit_include_dirs()" in html
    for d in dirs:
        assert d not in str(e) and d not in html
