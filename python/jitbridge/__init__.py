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

Arrays from any framework: as_array(x) gives a jitbridge.ArrayView (pointer, shape, strides in
elements, dtype, device) through the DLPack exchange API, __dlpack__ or __cuda_array_interface__;
empty / zeros / empty_like allocate outputs (jitbridge.Tensor, or the framework's own array type
where it has the DLPack exchange API) that torch, CuPy, JAX and Numba take without a copy.
asarray(host_array) uploads a NumPy (or other host) array into a jitbridge.Tensor, and
numpy.from_dlpack(tensor, device="cpu") copies one back. Tensors come from jitbridge's stream-ordered pool, or
from an allocator (allocator=, using_allocator(), set_allocator(); jitbridge.allocators has CuPy, RMM and torch).
"""

from ._core import (
    CompileError,
    CudaNotFoundError,
    DriverError,
    LaunchError,
    LinkError,
    Kernel,
    NoDriverError,
    NvrtcError,
    Param,
    Program,
    Resources,
    Signature,
    cache_clear,
    cache_info,
    default_arch,
    link,
    driver_info,
    nvrtc_version,
    synchronize,
    toolkit_include_dirs,
)
from ._core import ArrayView, Tensor, as_array, asarray, empty, empty_like, from_ptr, zeros
from ._kernels import RawKernel, RawModule
from ._compile_warnings import CompileWarning, warn_about as _warn_about
from ._benchmark import CudaEventTimer, benchmark
from ._benchmark_result import BenchmarkResult, Comparison
from . import _core, _cuda_search
from ._bounded import bound_methods as _bound_methods, bounded as _bounded
from ._like import with_framework_allocators as _with_framework_allocators
from . import allocators
from .allocators import get_allocator, set_allocator, using_allocator

# The nvidia-* wheels of this environment, for the run-time search of NVRTC and the CUDA headers
# (before anything is loaded; docs/DESIGN.md, "Finding CUDA at run time").
_core._set_wheel_roots(_cuda_search.wheel_roots())

__version__ = "0.1.0"


def compile(code, *, options=(), name_expressions=(), headers=None, include_paths=(), arch=None, ptx=False,
            program_name="kernel.cu"):
    # A Python function in front of the compiled one: Python's own TypeError for a wrong call (a
    # positional option list, an unknown keyword) names the argument without echoing `code`, which
    # pybind11's "Invoked with: ..." would print whole (docs/DESIGN.md, "Errors").
    program = _core.compile(code, options=options, name_expressions=name_expressions, headers=headers,
                            include_paths=include_paths, arch=arch, ptx=ptx, program_name=program_name)
    _warn_about(program, stacklevel=2)  # NVRTC's warnings as a CompileWarning (once per compiled program)
    return program


compile.__doc__ = _core.compile.__doc__.partition("\n\n")[2] if "\n\n" in _core.compile.__doc__ else None

# The other compiled entry points, behind bounded(): a call matching no signature names the argument types
# instead of echoing every value (pybind11's "Invoked with: ..." would print a whole source).
cache_info, cache_clear, nvrtc_version, default_arch, toolkit_include_dirs, driver_info, synchronize = (
    _bounded(f) for f in (cache_info, cache_clear, nvrtc_version, default_arch, toolkit_include_dirs, driver_info,
                          synchronize))
as_array, asarray, from_ptr, empty, zeros, empty_like = (_bounded(f) for f in (as_array, asarray, from_ptr, empty, zeros,
                                                                             empty_like))
# Outputs like a CuPy or Numba array come from that framework's allocator (_like.py).
empty, zeros, empty_like = _with_framework_allocators(empty, zeros, empty_like)
link = _bounded(link)
# pybind11 names link's *args "args"; the docstring calls them inputs.
link.__signature__ = link.__signature__.replace(parameters=[
    p.replace(name="inputs") if p.kind is p.VAR_POSITIONAL else p for p in link.__signature__.parameters.values()])
_bound_methods(Program, ("kernel", "lowered_name"))
_bound_methods(Resources, ("as_dict",))
_bound_methods(_core._Kernel, ("max_active_blocks_per_sm", "suggest_block_size"))
_bound_methods(_core._Module, ("kernel_names",))


def load_ipython_extension(ipython):
    """``%load_ext jitbridge`` in IPython/Jupyter: adds the ``%%cuda_kernel NAME`` cell magic (jitbridge.ipython)."""
    from .ipython import load_ipython_extension as load

    load(ipython)


# Show the compiled classes and functions as jitbridge.Program & co. (help(), reprs of the types; the classes are
# named so from the start, for the signatures in the docstrings: python/src/bindings.hpp, public_class).
for _cls in (Program, Kernel, Signature, Param, Resources, ArrayView, Tensor, cache_info, cache_clear, nvrtc_version,
             default_arch, toolkit_include_dirs, driver_info, synchronize, as_array, asarray, from_ptr, empty, zeros,
             empty_like, link, set_allocator, get_allocator):
    _cls.__module__ = __name__
del _cls

__all__ = [
    "compile",
    "link",
    "LinkError",
    "Program",
    "Kernel",
    "Signature",
    "Param",
    "Resources",
    "CompileError",
    "CompileWarning",
    "NvrtcError",
    "CudaNotFoundError",
    "NoDriverError",
    "DriverError",
    "cache_info",
    "cache_clear",
    "nvrtc_version",
    "default_arch",
    "toolkit_include_dirs",
    "driver_info",
    "RawKernel",
    "RawModule",
    "LaunchError",
    "synchronize",
    "as_array",
    "from_ptr",
    "ArrayView",
    "Tensor",
    "empty",
    "zeros",
    "empty_like",
    "asarray",
    "allocators",
    "set_allocator",
    "get_allocator",
    "using_allocator",
    "benchmark",
    "BenchmarkResult",
    "Comparison",
    "CudaEventTimer",
]
