"""jitbridge — JIT-compile CUDA C++ with NVRTC and inspect what came out.

    import jitbridge
    program = jitbridge.compile(source, options=["-DN=4"], arch="sm_90")
    kernel = program.kernel("saxpy")
    str(kernel.signature)        # '(float const*, float*, int)' — after typedefs and macros
    kernel.resources.registers   # what ptxas reported

Compiled programs are cached in memory and on disk ($JITBRIDGE_CACHE_DIR, else
~/.cache/jitbridge); see cache_info() and cache_clear(). Errors in the source raise CompileError,
whose str() points at the offending line. ``python -m jitbridge --help`` lists the command line
(compile a file, manage the cache, check the setup).
"""

from ._core import (
    CompileError,
    DriverError,
    Kernel,
    NoDriverError,
    NvrtcError,
    Param,
    Program,
    Resources,
    Signature,
    cache_clear,
    cache_info,
    compile,
    default_arch,
    driver_info,
    nvrtc_version,
    toolkit_include_dirs,
)

__version__ = "0.1.0"

# Show the compiled classes as jitbridge.Program & co. (help(), reprs of the types).
for _cls in (Program, Kernel, Signature, Param, Resources):
    _cls.__module__ = __name__
del _cls

__all__ = [
    "compile",
    "Program",
    "Kernel",
    "Signature",
    "Param",
    "Resources",
    "CompileError",
    "NvrtcError",
    "NoDriverError",
    "DriverError",
    "cache_info",
    "cache_clear",
    "nvrtc_version",
    "default_arch",
    "toolkit_include_dirs",
    "driver_info",
]
