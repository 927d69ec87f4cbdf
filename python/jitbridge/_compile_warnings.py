"""CompileWarning: NVRTC's warnings about a program that compiled, raised through Python's warnings module."""

import os
import re
import warnings

__all__ = ["CompileWarning"]

# "kernel.cu(3): warning #177-D: ...", "warning: ...", "nvrtc: warning: ...".
_WARNING_LINE = re.compile(r"(^|\): |^nvrtc: )warning\b")
_MAX_LINES = 20


class CompileWarning(UserWarning):
    """NVRTC compiled the program but warned about it (an unused variable, a narrowing conversion, ...).

    Issued by ``compile()``, ``RawKernel`` and ``RawModule(code=...)`` once per program NVRTC compiles; a program
    from the memory or disk cache issues none unless ``JITBRIDGE_COMPILE_WARNINGS=always`` (then every call does,
    as Python's warning filters allow); ``JITBRIDGE_COMPILE_WARNINGS=0`` issues none. The message is the program's
    name and the first 20 lines of NVRTC's log (the whole log: ``Program.log``). Silence or escalate them like any
    warning: ``warnings.filterwarnings("ignore", category=jitbridge.CompileWarning)``, or ``"error"``; NVRTC's
    own ``-diag-suppress=N`` option drops one kind at the source.
    """

    __module__ = "jitbridge"


def warn_about(program, stacklevel):
    """Issues a CompileWarning for ``program``'s NVRTC warnings (see CompileWarning for when); ``stacklevel`` as
    warnings.warn's, counted from the caller of this function."""
    mode = os.environ.get("JITBRIDGE_COMPILE_WARNINGS", "").strip().lower()
    if mode in ("0", "off", "no", "false", "never"):
        return
    if program.origin != "compiled" and mode != "always":
        return
    lines = program.log.rstrip().splitlines()
    if not any(_WARNING_LINE.search(line) for line in lines):
        return
    shown = "\n".join(lines[:_MAX_LINES])
    if len(lines) > _MAX_LINES:
        shown += f"\n[... {len(lines) - _MAX_LINES} more lines in Program.log]"
    warnings.warn(CompileWarning(f"{program.program_name}: NVRTC warnings:\n{shown}"), stacklevel=stacklevel + 1)
