"""jitbridge's exception classes; the compiled core raises them (see python/src/errors.cpp)."""

__all__ = ["CompileError", "NvrtcError", "CudaNotFoundError", "LinkError", "NoDriverError", "DriverError", "LaunchError"]


class CompileError(RuntimeError):
    """NVRTC rejected the source (or its options).

    ``str(e)`` is the diagnostic: ``kernel.cu:4:21: error: ...`` (or ``h.h:5:3: ...`` for an error in a
    header, or ``name_expressions[1] 'scale<flaot>': ...`` for a name expression), the offending line with a
    caret under the column, then the first 20 lines of NVRTC's log (echoed source lines cut at 200
    characters). The pieces:

    log           NVRTC's whole log.
    program_name  the file name the source was compiled as.
    options       the options NVRTC was given (tuple of str).
    kernel        the kernel whose body holds the first error, or None.
    file          the file holding the first error (program_name or a header), or None.
    name_expression  the index into name_expressions of the expression that failed, or None.
    line, column  1-based position of the first error in ``file``, or None when unknown.
    message       the first error's message.
    source_line   that line of the source, as written, or None.
    """

    __module__ = "jitbridge"

    def __init__(self, what="", *, log="", program_name="", options=(), kernel=None, line=None,
                 column=None, message="", source_line=None, file=None, name_expression=None):
        """``what`` is str(e); the keywords set the fields of the same names (see the class). jitbridge raises it
        itself; made by hand, it is what a test or a wrapper re-raising an NVRTC failure would build."""
        super().__init__(what)
        self.file = file
        self.name_expression = name_expression
        self.log = log
        self.program_name = program_name
        self.options = tuple(options)
        self.kernel = kernel
        self.line = line
        self.column = column
        self.message = message
        self.source_line = source_line


class NvrtcError(RuntimeError):
    """NVRTC itself failed (not the user's source): out of memory, a missing library, ..."""

    __module__ = "jitbridge"


class CudaNotFoundError(NvrtcError):
    """NVRTC (or nvJitLink) was not found, or JITBRIDGE_NVRTC & co. point at nothing usable.

    The message names what to install (``pip install nvidia-cuda-nvrtc nvidia-cuda-runtime
    nvidia-cuda-cccl``, or a CUDA toolkit) and every place searched with why it was skipped, or the
    setting that is wrong. ``python -m jitbridge doctor`` shows the same search. A RuntimeError (and
    a NvrtcError); ``import jitbridge`` works without CUDA, only compiling raises it.
    """

    __module__ = "jitbridge"


class LinkError(RuntimeError):
    """nvJitLink refused to link (jitbridge.link, or compile() of a -dc / -rdc / -dlto program).

    ``str(e)`` names each undefined symbol demangled with its mangled name (``undefined reference to
    `scale_of(float, int)` (_Z8scale_offi)``), then nvJitLink's error log. The pieces:

    error_log  nvJitLink's error log.
    info_log   its info log.
    undefined  the undefined symbols, demangled (tuple of str).
    input      the input an add step refused (its name), or None.
    code       the nvJitLinkResult of the failing call (an int).
    """

    __module__ = "jitbridge"

    def __init__(self, what="", *, error_log="", info_log="", undefined=(), input=None, code=None):
        """``what`` is str(e); the keywords set the fields of the same names (see the class; undefined becomes a
        tuple). jitbridge raises it itself."""
        super().__init__(what)
        self.error_log = error_log
        self.info_log = info_log
        self.undefined = tuple(undefined)
        self.input = input
        self.code = code


class NoDriverError(RuntimeError):
    """No usable CUDA driver on this machine (libcuda.so.1 missing, or cuInit failed)."""

    __module__ = "jitbridge"


class DriverError(RuntimeError):
    """A CUDA driver call failed; ``code`` is its CUresult (an int)."""

    __module__ = "jitbridge"

    def __init__(self, what="", *, code=None):
        """``what`` is str(e) (the call and the driver's name for the error); ``code`` the CUresult, an int or
        None. jitbridge raises it itself."""
        super().__init__(what)
        self.code = code


class LaunchError(RuntimeError):
    """A kernel launch failed, or an earlier kernel faulted and the driver reported it now.

    The message names the kernel being launched and, for a fault (an illegal address, say), the
    kernel launched last on that device. After a fault the device's CUDA context is unusable:
    every later CUDA call in the process fails, in jitbridge and in PyTorch or CuPy alike, and the
    process must be restarted. ``code`` is the CUresult (an int).
    """

    __module__ = "jitbridge"

    def __init__(self, what="", *, code=None):
        """``what`` is str(e) (the kernel and the driver's name for the error); ``code`` the CUresult, an int or
        None. jitbridge raises it itself."""
        super().__init__(what)
        self.code = code
