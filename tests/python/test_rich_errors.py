"""CompileError and launch-argument errors as HTML in Jupyter (jitbridge/_richerrors.py): the HTML itself, and the
IPython exception handler %load_ext jitbridge installs, driven through IPython's InteractiveShell (no GPU needed)."""

import pytest

import jitbridge
from jitbridge._richerrors import argument_error_html, compile_error_html, error_html

BAD = 'extern "C" __global__ void k(float* x) {\n  x[0] = undefined_thing + 1;  // <tag> & co\n}\n'
SRC = 'extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) { y[0] = a * x[0]; }\n'


@pytest.fixture(scope="module")
def compile_error():
    with pytest.raises(jitbridge.CompileError) as info:
        jitbridge.compile(BAD, arch="sm_90", options=["-DTAG=<x>"])
    return info.value


def test_compile_error_html_marks_the_column_and_folds_the_log(compile_error):
    e = compile_error
    assert (e.line, e.column) == (2, 10) and e.source_line == BAD.splitlines()[1]
    h = compile_error_html(e)
    assert "<b>CompileError</b> at <code>kernel.cu:2:10</code> in kernel <code>k</code>" in h
    assert "identifier &quot;undefined_thing&quot; is undefined" in h
    # The token at the column is marked; the rest of the line is escaped text (no raw <tag>).
    assert '  x[0] = <span style="' in h and '">undefined_thing</span> + 1;  // &lt;tag&gt; &amp; co' in h
    assert "<tag>" not in h
    caret_line = " " * len("2 | ") + " " * 9 + "^" + "~" * (len("undefined_thing") - 1)
    assert caret_line.replace(" ", "") in h.replace(" ", "")
    assert "2 | " in h
    assert "<details><summary>NVRTC log (" in h and "-DTAG=&lt;x&gt;" in h
    assert error_html(e) == h


def test_compile_error_without_a_position():
    e = jitbridge.CompileError("nvrtc: bad option", log="bad option", program_name="kernel.cu", options=("-x",),
                               message="bad option")
    h = compile_error_html(e)
    assert "at <code>kernel.cu</code>" in h and "<pre" not in h.split("<details>")[0]


@pytest.mark.parametrize("exc, pieces", [
    (TypeError("saxpy: argument 1 (float const*): expected a float32 array, got int64"),
     ["<b>TypeError</b> launching <code>saxpy</code>: argument 1, parameter <code", ">float const*</code>",
      "expected a float32 array, got int64"]),
    (OverflowError("saxpy: argument 3 (int): 1099511627776 does not fit in 'int'"),
     ["<b>OverflowError</b>", "argument 3, parameter", ">int</code>", "does not fit in &#x27;int&#x27;"]),
    (TypeError("saxpy: argument 0: cannot pass a str (expected an array)"),
     ["argument 0</div>", "cannot pass a str (expected an array)"]),
    (TypeError("scale<float, 1>(float*, float) takes 2 arguments, 3 given"),
     ["launching <code>scale&lt;float, 1&gt;(float*, float)</code>", "it takes <b>2</b> arguments, <b>3</b> given"]),
])
def test_argument_error_html(exc, pieces):
    h = argument_error_html(exc)
    for p in pieces:
        assert p in h, (p, h)
    assert error_html(exc) == h


def test_a_real_arity_error_renders():
    k = jitbridge.RawKernel(SRC, "saxpy", arch="sm_90")
    with pytest.raises(TypeError) as info:
        k(1, 32, (1.0,))
    assert "it takes <b>4</b> arguments, <b>1</b> given" in error_html(info.value)


@pytest.mark.parametrize("exc", [TypeError("unsupported operand"), ValueError("x: argument"), KeyError("a"),
                                 ValueError("grid: x = 0 is out of range")])
def test_other_errors_get_no_html(exc):
    assert error_html(exc) is None


# ---- the IPython handler ---------------------------------------------------------------------------------------


@pytest.fixture
def shell():
    pytest.importorskip("IPython")
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.display_pub = CapturingDisplayPublisher()
    yield sh
    InteractiveShell.clear_instance()


def published_html(sh):
    return [o["data"]["text/html"] for o in sh.display_pub.outputs if "text/html" in o["data"]]


def test_notebook_shows_a_compile_error_as_html_then_the_traceback(shell, capsys):
    shell.kernel = object()  # what a Jupyter kernel's shell has; a terminal IPython has none
    assert shell.run_cell("%load_ext jitbridge").success
    cell = "%%cuda_kernel k --arch sm_90\n" + BAD
    result = shell.run_cell(cell)
    assert isinstance(result.error_in_exec, jitbridge.CompileError)
    html = published_html(shell)
    assert len(html) == 1 and ">undefined_thing</span>" in html[0] and "NVRTC log" in html[0]
    out = capsys.readouterr().out
    assert "CompileError" in out and "undefined_thing" in out  # the usual traceback follows
    # Launch-argument errors too; other errors only get the traceback.
    shell.run_cell(f"import jitbridge\nk = jitbridge.RawKernel({SRC!r}, 'saxpy', arch='sm_90')\nk(1, 32, (1.0,))")
    assert len(published_html(shell)) == 2 and "<b>1</b> given" in published_html(shell)[1]
    result = shell.run_cell("int('x')")
    assert isinstance(result.error_in_exec, ValueError) and len(published_html(shell)) == 2
    assert "invalid literal for int()" in capsys.readouterr().out
    # Loading again does not stack a second handler.
    shell.run_cell("%reload_ext jitbridge")
    shell.run_cell(cell)
    assert len(published_html(shell)) == 3


def test_terminal_ipython_shows_plain_text_only(shell, capsys):
    assert not hasattr(shell, "kernel")
    shell.run_cell("%load_ext jitbridge.ipython")
    result = shell.run_cell("%%cuda_kernel k --arch sm_90\n" + BAD)
    assert isinstance(result.error_in_exec, jitbridge.CompileError)
    assert published_html(shell) == []
    out = capsys.readouterr().out
    assert "undefined_thing" in out and "^" in out  # the message's own caret


def test_a_handler_registered_before_keeps_its_exceptions(shell, capsys):
    seen = []

    def earlier(self, etype, value, tb, tb_offset=None):
        seen.append(etype)

    shell.set_custom_exc((KeyError,), earlier)
    shell.kernel = object()
    shell.run_cell("%load_ext jitbridge")
    shell.run_cell("{}['missing']")
    assert seen == [KeyError]
    shell.run_cell("%%cuda_kernel k --arch sm_90\n" + BAD)
    assert len(published_html(shell)) == 1 and seen == [KeyError]


def test_a_shell_without_custom_exception_handlers_is_left_alone():
    from jitbridge._richerrors import install

    class Bare:
        pass

    shell = Bare()
    install(shell)
    assert vars(shell) == {}
