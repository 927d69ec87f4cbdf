"""jitbridge errors as HTML in Jupyter: a CompileError shows its source line with the error's column highlighted and
the NVRTC log folded; a launch-argument TypeError/ValueError names the kernel and the parameter. Installed by
``%load_ext jitbridge`` (an IPython custom exception handler that adds the HTML above the usual traceback in a
notebook and changes nothing in a terminal, where the plain-text message already has the caret)."""

import html
import re

from ._errors import CompileError

__all__ = ["error_html", "install"]

# Launch-argument errors of the compiled core (launch/src/arguments.cpp): "kernel: argument 2 (float const*): why"
# ("kernel: argument 0: why" when the argument's kind is wrong before any parameter is matched) and
# "kernel(sig) takes 4 arguments, 3 given".
_ARGUMENT = re.compile(r"(?P<kernel>[^\s:][^:]*?): argument (?P<index>\d+)(?: \((?P<param>[^()]*)\))?: (?P<why>.+)",
                       re.S)
_ARITY = re.compile(r"(?P<sig>[^\s(][^(]*\(.*\)) takes (?P<want>\d+) arguments?, (?P<got>\d+) given(?P<rest>.*)", re.S)

_STYLE = ("font-family: var(--jp-code-font-family, monospace); border-left: 4px solid #d9534f; padding: 4px 10px; "
          "background: rgba(217, 83, 79, 0.06)")
_MARK = "background: rgba(217, 83, 79, 0.35); border-bottom: 2px solid #d9534f"
_MAX_LOG_LINES = 200


def _e(s):
    return html.escape(str(s), quote=True)


def _highlighted(line, column):
    """The source line with the token at 1-based ``column`` marked (the whole rest of the line if it starts no
    identifier), and the caret line under it; both HTML-escaped."""
    if column is None or not 1 <= column <= len(line) + 1:
        return _e(line), ""
    start = column - 1
    end = start + 1
    if start < len(line) and (line[start].isalnum() or line[start] == "_"):
        while end < len(line) and (line[end].isalnum() or line[end] == "_"):
            end += 1
    end = min(end, len(line))
    marked = f"{_e(line[:start])}<span style=\"{_MARK}\">{_e(line[start:end]) or '&nbsp;'}</span>{_e(line[end:])}"
    caret = " " * start + "^" + "~" * max(0, end - start - 1)
    return marked, caret


def _shown_options(options):
    """The options as str(CompileError) shows them: the -I of the CUDA header directories jitbridge adds (this
    machine's paths) named once instead of listed."""
    from . import toolkit_include_dirs

    try:
        own = {"-I" + d for d in toolkit_include_dirs()}
    except Exception:  # noqa: BLE001 - no CUDA headers found: nothing of jitbridge's to leave out
        own = set()
    shown = " ".join(o for o in options if o not in own)
    return shown + ", plus -I of each of toolkit_include_dirs()" if any(o in own for o in options) else shown


def compile_error_html(e):
    """HTML for a CompileError: where (file:line:column, the kernel), the message, the source line with the error
    marked and a caret under it, the options, and NVRTC's whole log folded."""
    where = e.file or e.program_name or "the source"
    if e.line:
        where += f":{e.line}" + (f":{e.column}" if e.column else "")
    parts = [f"<div style=\"{_STYLE}\">", f"<div><b>CompileError</b> at <code>{_e(where)}</code>"]
    if e.kernel:
        parts.append(f" in kernel <code>{_e(e.kernel)}</code>")
    if e.name_expression is not None:
        parts.append(f" (name_expressions[{e.name_expression}])")
    parts.append("</div>")
    message = e.message or (str(e).splitlines() or [""])[0]
    parts.append(f"<div style=\"margin: 4px 0\"><b>error:</b> {_e(message)}</div>")
    if e.source_line is not None:
        marked, caret = _highlighted(e.source_line, e.column)
        gutter = f"{e.line} | " if e.line else "| "
        pad = " " * (len(gutter) - 2) + "| "
        body = f"{_e(gutter)}{marked}"
        if caret:
            body += f"\n{_e(pad)}<span style=\"color: #d9534f\">{_e(caret)}</span>"
        parts.append(f"<pre style=\"margin: 4px 0\">{body}</pre>")
    if e.options:
        parts.append(f"<div><small>options: <code>{_e(_shown_options(e.options))}</code></small></div>")
    if e.log:
        lines = e.log.splitlines()
        shown = lines[:_MAX_LOG_LINES]
        more = f"\n[... {len(lines) - len(shown)} more lines]" if len(lines) > len(shown) else ""
        parts.append(f"<details><summary>NVRTC log ({len(lines)} line{'s' if len(lines) != 1 else ''})</summary>"
                     f"<pre>{_e(chr(10).join(shown) + more)}</pre></details>")
    parts.append("</div>")
    return "".join(parts)


def argument_error_html(e):
    """HTML for a launch-argument TypeError / ValueError / OverflowError of jitbridge, or None for other errors."""
    text = str(e)
    m = _ARGUMENT.fullmatch(text)
    if m:
        param = f", parameter <code style=\"{_MARK}\">{_e(m['param'])}</code>" if m["param"] else ""
        return (f"<div style=\"{_STYLE}\"><div><b>{_e(type(e).__name__)}</b> launching <code>{_e(m['kernel'])}</code>:"
                f" argument {_e(m['index'])}{param}</div><div style=\"margin: 4px 0\">{_e(m['why'])}</div></div>")
    m = _ARITY.fullmatch(text)
    if m:
        return (f"<div style=\"{_STYLE}\"><div><b>{_e(type(e).__name__)}</b> launching <code>{_e(m['sig'])}</code>"
                f"</div><div style=\"margin: 4px 0\">it takes <b>{_e(m['want'])}</b> argument"
                f"{'s' if m['want'] != '1' else ''}, <b>{_e(m['got'])}</b> given{_e(m['rest'])}</div></div>")
    return None


def error_html(exc):
    """HTML for a jitbridge CompileError or launch-argument error, or None for any other exception."""
    if isinstance(exc, CompileError):
        return compile_error_html(exc)
    if isinstance(exc, (TypeError, ValueError, OverflowError)):
        return argument_error_html(exc)
    return None


_HANDLED = (CompileError, TypeError, ValueError, OverflowError)


def _rich_frontend(shell):
    """Whether the shell shows HTML (a Jupyter kernel's shell has .kernel; a terminal IPython has none)."""
    return getattr(shell, "kernel", None) is not None


def install(shell, *, rich=None):
    """Registers jitbridge's exception handler with an IPython shell (idempotent). For the exceptions error_html
    renders, a rich frontend (``rich``; default: a Jupyter kernel) gets the HTML through the shell's display
    publisher, then the usual traceback; everything else goes to the handler registered before (if any) or to the
    usual traceback. A handler that fails is unregistered by IPython itself, so an error here never hides one.
    A shell without set_custom_exc (not IPython's) is left as it is."""
    if getattr(shell, "_jitbridge_rich_errors", False) or not callable(getattr(shell, "set_custom_exc", None)):
        return  # installed already, or a shell without IPython's custom exception handlers
    prev_types, prev_handler = tuple(shell.custom_exceptions), None
    if prev_types:
        prev_handler = shell.CustomTB

    def handler(self, etype, value, tb, tb_offset=None):
        body = error_html(value) if isinstance(value, _HANDLED) else None
        if body is None:
            if prev_handler is not None and isinstance(value, prev_types):
                return prev_handler(etype, value, tb, tb_offset=tb_offset)
            self.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
            return None
        if rich if rich is not None else _rich_frontend(self):
            self.display_pub.publish(data={"text/html": body, "text/plain": str(value)})
        self.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
        return None

    shell.set_custom_exc(prev_types + tuple(t for t in _HANDLED if t not in prev_types), handler)
    shell._jitbridge_rich_errors = True
