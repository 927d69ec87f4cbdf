"""
jitbridge's compiled core: NVRTC compilation, the kernel cache and the environment. Use it through the jitbridge package.
"""
from __future__ import annotations
import collections.abc
import os
import jitbridge
from jitbridge import CompileError
from jitbridge import CudaNotFoundError
from jitbridge import DriverError
from jitbridge import LaunchError
from jitbridge import LinkError
from jitbridge import NoDriverError
from jitbridge import NvrtcError
import typing
import typing_extensions
__all__: list[str] = ['ArrayView', 'CompileError', 'CudaNotFoundError', 'DriverError', 'Kernel', 'LaunchError', 'LinkError', 'NoDriverError', 'NvrtcError', 'Param', 'Program', 'Resources', 'Signature', 'Tensor', 'as_array', 'asarray', 'cache_clear', 'cache_info', 'compile', 'default_arch', 'driver_info', 'empty', 'empty_like', 'from_ptr', 'get_allocator', 'link', 'nvrtc_library', 'nvrtc_version', 'set_allocator', 'synchronize', 'toolkit_include_dirs', 'zeros']
class ArrayView:
    """
    A view of an array from any framework (jitbridge.as_array, jitbridge.from_ptr).
    
    It keeps the producer alive: the object it was made from (or from_ptr's owner) and, for
    DLPack producers, the DLPack tensor, whose deleter runs once when the view goes. Fields:
    ptr (int, address of element 0), shape, strides (in elements), dtype (str), device
    ('cuda:0', 'cpu'), readonly, stream (the consumer stream the view was made for, as the
    array API writes it: 1 is the legacy default stream, 2 the per-thread one). jitbridge never
    frees the memory it views. Made by as_array() and from_ptr() only.
    """
    def __dlpack__(self, *, stream: typing.Any = None, max_version: typing.Any = None, dl_device: typing.Any = None, copy: typing.Any = None) -> typing.Any:
        """
        Export the viewed memory (no copy; copy=True raises BufferError). The exported tensor keeps this view, and so its producer, alive; `stream` waits for the view's stream.
        """
    def __dlpack_device__(self: jitbridge.ArrayView) -> tuple[int, int]:
        """
        (device_type, device_id) as DLPack numbers them: (2, N) for cuda:N, (1, 0) for the CPU.
        """
    def __init__(self, *args, **kwargs) -> None:
        """
        Not made directly: as_array() and from_ptr() give ArrayViews. Raises TypeError.
        """
    def __repr__(self: jitbridge.ArrayView) -> str:
        """
        The shape, dtype, device and address.
        """
    @property
    def __cuda_array_interface__(self) -> dict:
        """
        The CUDA array interface (v3) of the viewed memory, for Numba and CuPy; its 'stream' is the view's stream.
        """
    @property
    def device(self) -> str:
        """
        Where the memory is: 'cuda:N' or 'cpu'.
        """
    @property
    def dtype(self) -> str:
        """
        The element type's name: 'float32', 'bfloat16', 'int8', 'bool', ...
        """
    @property
    def is_c_contiguous(self) -> bool:
        """
        Whether the elements are dense and row-major (strides as NumPy's C order).
        """
    @property
    def itemsize(self) -> int:
        """
        Bytes per element.
        """
    @property
    def nbytes(self) -> int:
        """
        size * itemsize, as NumPy counts it (a broadcast view counts every element).
        """
    @property
    def ndim(self) -> int:
        """
        len(shape).
        """
    @property
    def obj(self) -> typing.Any:
        """
        The object the view keeps alive (as_array's argument, from_ptr's owner), or None.
        """
    @property
    def ptr(self) -> int:
        """
        The address of element 0 (an int; device memory unless device is 'cpu').
        """
    @property
    def readonly(self) -> bool:
        """
        Whether the producer marked it read-only (launches then take it only into const pointees).
        """
    @property
    def shape(self) -> tuple:
        """
        The shape, a tuple of ints.
        """
    @property
    def size(self) -> int:
        """
        The number of elements (the product of shape).
        """
    @property
    def stream(self) -> int:
        """
        The consumer stream the view was made for, as the array API writes it (1: the legacy default stream, 2: the per-thread one, else the handle).
        """
    @property
    def strides(self) -> tuple:
        """
        Strides in elements (not bytes), as the producer gave them (negative ones too).
        """
class Kernel:
    """
    One kernel of a Program (Program.kernels, Program.kernel()): what the compiler made of it. Read-only; keeps its program alive. To launch it: RawModule.from_program(p).get_function(name).
    """
    def __init__(self, *args, **kwargs) -> None:
        """
        Not made directly: Program.kernels and Program.kernel() give Kernels. Raises TypeError.
        """
    def __repr__(self) -> str:
        """
        <Kernel saxpy(float const*, float*, int) regs=16>: name, signature and registers ('?' if unknown).
        """
    @property
    def lowered_name(self) -> str:
        """
        The symbol in the binary.
        """
    @property
    def name(self) -> str:
        """
        extern "C" kernels: their name; templates: the name expression as given; other C++ kernels: the qualified name ('ns::scale').
        """
    @property
    def resources(self) -> jitbridge.Resources:
        """
        What ptxas reported (registers, shared memory, spills) as Resources.
        """
    @property
    def signature(self) -> typing.Any:
        """
        The Signature, or None if the compiler could not be asked.
        """
class Param:
    """
    One kernel parameter, as the compiler sees it after macros and typedefs. Read-only; made by Signature, never by hand.
    """
    def __init__(self, *args, **kwargs) -> None:
        """
        Not made directly: Signature.params gives Params. Raises TypeError.
        """
    def __repr__(self) -> str:
        """
        <Param pointer float const* size=8 align=8>: kind, spelling, size and alignment.
        """
    @property
    def align(self) -> int:
        """
        Its alignment in the argument buffer.
        """
    @property
    def dtype(self) -> str | None:
        """
        The dtype the parameter takes, as launches check it: a pointer's or tensor view's element ('float const*' -> 'float32', '__half*' -> 'float16', 'float4*' -> 'float32' with lanes 4), or a scalar's ('int' -> 'int32', '__nv_bfloat16' -> 'bfloat16'). None for void* (any dtype), char* (int8 or uint8) and structs.
        """
    @property
    def element_const(self) -> bool:
        """
        For pointers and tensor views: whether the element is const (const float*, Tensor<const float, 2>). False for other parameters.
        """
    @property
    def is_const(self) -> bool:
        """
        For pointers: whether the pointee is const.
        """
    @property
    def kind(self) -> str:
        """
        'pointer' or 'value'.
        """
    @property
    def lanes(self) -> int:
        """
        For pointers to CUDA vector types: the dtype's elements per pointee (4 for float4*; arrays hold a multiple of it). 1 otherwise.
        """
    @property
    def pointee_align(self) -> int:
        """
        For pointers: alignof the pointee (0 for void and incomplete types).
        """
    @property
    def pointee_size(self) -> int:
        """
        For pointers: sizeof the pointee (0 for void and incomplete types).
        """
    @property
    def rank(self) -> int:
        """
        For jitbridge::Tensor<T, N> views: N. 0 for every other parameter.
        """
    @property
    def size(self) -> int:
        """
        Bytes the parameter occupies in the argument buffer.
        """
    @property
    def spelling(self) -> str:
        """
        The whole type as the compiler printed it: 'float const*'.
        """
    @property
    def type(self) -> str:
        """
        The pointee type for pointers, else the value type, without top-level const: 'float', '__half', 'Params'.
        """
class Program:
    """
    An immutable compiled program, as returned by compile() and link(). Holds its binary and kernels; safe to share between threads. Pickles as its compile request (a linked one raises TypeError).
    """
    def __init__(self, *args, **kwargs) -> None:
        """
        Not made directly: compile() and link() give Programs. Raises TypeError.
        """
    def __repr__(self) -> str:
        """
        <Program kernel.cu for sm_90: 1 kernel (saxpy), compiled>: name, target, kernels and origin.
        """
    def kernel(self, name: str) -> jitbridge.Kernel:
        """
        The kernel called `name` (its name or lowered name). KeyError if there is none.
        """
    def lowered_name(self, name_expression: str) -> str:
        """
        The lowered (mangled) name of a name expression given to compile(). KeyError otherwise.
        """
    @property
    def _request(self) -> typing.Any:
        """
        What compile() was asked, as its keyword arguments (relative include paths made absolute; arch None when defaulted), or None. Pickling keeps this.
        """
    @property
    def arch(self) -> str:
        """
        The target actually used: 'sm_90'.
        """
    @property
    def cubin(self) -> bytes:
        """
        The CUBIN (ELF) image; b'' for a virtual (compute_XX) target. The source's own binary: built once more without jitbridge's parameter-type probe on first use (through the kernel cache), so no internal symbol is in it.
        """
    @property
    def fatbin(self) -> bytes:
        """
        The fat binary of compile(arch=[...]) (one image per target); b'' otherwise. Built without the probe, as cubin.
        """
    @property
    def from_cache(self) -> bool:
        """
        True when the program came from the memory or disk cache (origin != 'compiled').
        """
    @property
    def kernels(self) -> tuple:
        """
        The user's kernels, as a tuple of Kernel, in binary order.
        """
    @property
    def link_input(self) -> bytes:
        """
        What link() takes from this program: the relocatable cubin (-dc, -rdc=true) or the LTO-IR (-dlto); b'' for other programs. Built without the probe, as cubin.
        """
    @property
    def link_input_kind(self) -> typing.Any:
        """
        'cubin', 'ltoir' or None: the kind of link_input.
        """
    @property
    def linked(self) -> bool:
        """
        True when the binary is nvJitLink's output (a -dc/-rdc/-dlto program, or link()'s result).
        """
    @property
    def log(self) -> str:
        """
        NVRTC's warnings ('' when there were none).
        """
    @property
    def options(self) -> tuple:
        """
        The options NVRTC was given, in order.
        """
    @property
    def origin(self) -> str:
        """
        'compiled', 'memory' (this process's cache) or 'disk' (the on-disk cache).
        """
    @property
    def program_name(self) -> str:
        """
        The file name given to compile() (diagnostics refer to it).
        """
    @property
    def ptx(self) -> str:
        """
        The PTX text when compiled with ptx=True or for a compute_XX target, else ''. Built without the probe, as cubin.
        """
    @property
    def templates(self) -> tuple:
        """
        The template kernels the source declares, as (name, template header, example instantiation) tuples: ('scale', 'template <typename T, int N>', 'scale<float, 1>'). Each becomes a kernel only through a name expression.
        """
class Resources:
    """
    What ptxas reported for one kernel (read-only; Kernel.resources). known is False for PTX-only builds (compute_XX targets), and every count is 0 then.
    """
    def __init__(self, *args, **kwargs) -> None:
        """
        Not made directly: Kernel.resources gives Resources. Raises TypeError.
        """
    def __repr__(self) -> str:
        """
        <Resources regs=16 smem=0 lmem=0 cmem=376 spills=0/0 barriers=1>, or <Resources unknown>.
        """
    def as_dict(self) -> dict:
        """
        The fields as a new dict (known, registers, barriers, shared_bytes, local_bytes, const_bytes, spill_store_bytes, spill_load_bytes).
        """
    @property
    def barriers(self) -> int:
        """
        Named barriers the kernel uses.
        """
    @property
    def const_bytes(self) -> int:
        """
        cmem[0]: kernel parameters and constants, bytes.
        """
    @property
    def known(self) -> bool:
        """
        Whether ptxas reported on this kernel (False for PTX-only builds).
        """
    @property
    def local_bytes(self) -> int:
        """
        Stack frame, bytes per thread.
        """
    @property
    def registers(self) -> int:
        """
        Registers per thread.
        """
    @property
    def shared_bytes(self) -> int:
        """
        Static shared memory, bytes per block.
        """
    @property
    def spill_load_bytes(self) -> int:
        """
        Bytes of register spill loads per thread.
        """
    @property
    def spill_store_bytes(self) -> int:
        """
        Bytes of register spill stores per thread (0 when nothing spills).
        """
class Signature:
    """
    A kernel's parameters, a read-only sequence of Param (len(), iteration, indexing). str() gives '(float const*, __half*, int)'.
    """
    def __getitem__(self, index: typing.Any) -> typing.Any:
        """
        The Param at `index` (negative indices count from the end), or a tuple of them for a slice. IndexError out of range, TypeError for other index types.
        """
    def __init__(self, *args, **kwargs) -> None:
        """
        Not made directly: Kernel.signature gives Signatures. Raises TypeError.
        """
    def __iter__(self) -> collections.abc.Iterator:
        """
        The parameters in order, as Param.
        """
    def __len__(self) -> int:
        """
        The number of parameters.
        """
    def __repr__(self) -> str:
        """
        <Signature (float const*, float*, int)>.
        """
    def __str__(self) -> str:
        """
        The parameter types as the compiler printed them: '(float const*, __half*, int)'.
        """
    @property
    def params(self) -> tuple:
        """
        The parameters, as a tuple of Param.
        """
class Tensor:
    """
    A C-contiguous CUDA array owned by jitbridge (jitbridge.empty, zeros, empty_like).
    
    Its memory is allocated in stream order (cuMemAllocAsync) on its stream and freed in stream order
    when the last owner lets go (this object, DLPack capsules handed out, views): work already queued
    that uses it stays valid. `stream` is the stream the contents are ordered on: the allocation
    stream, then the last stream it was handed to (a launch, or __dlpack__(stream=...)).
    It keeps alive every stream it stores (the allocation stream, the streams it was handed to)
    until its memory is freed: the stream object given as stream=, the one the stream came from, or
    CuPy's current Stream object; a raw int handle that is none of those must outlive the tensor
    (as with torch.Tensor.record_stream).
    Exports __dlpack__ / __dlpack_device__ and __cuda_array_interface__ (v3), so torch.from_dlpack,
    cupy.from_dlpack / cupy.asarray, jax.dlpack.from_dlpack and numba.cuda.as_cuda_array take it
    without a copy. Made by empty(), zeros(), empty_like() and asarray() only.
    """
    def __dlpack__(self: jitbridge.Tensor, *, stream: typing.Any = None, max_version: typing.Any = None, dl_device: typing.Any = None, copy: typing.Any = None) -> typing.Any:
        """
        A DLPack capsule of this tensor (array API standard).
        
        stream: the consumer's stream (None: the legacy default stream; 1 legacy, 2 per-thread, else a
        handle; -1: no synchronisation). Unless -1, that stream waits for the tensor's stream (an event,
        no host sync), becomes the tensor's stream, and the tensor's memory is freed only after the work
        queued on it. The tensor keeps that stream alive when it is CuPy's current Stream (torch's and the
        default streams need nothing); any other handle must outlive the tensor. max_version >= (1, 0)
        gives a versioned capsule, else a legacy one. dl_device must be this tensor's device
        (BufferError otherwise) or the host, (1, 0): then a host copy is handed over (copy True or None;
        False is a BufferError), copied on the tensor's stream (or on `stream`, after it waits for the
        tensor's) and finished before this returns, since a host consumer cannot wait on a stream
        (numpy.from_dlpack(t, device='cpu')). copy=True exports a fresh copy (queued on the tensor's
        stream); None and False never copy on the device. The capsule keeps the memory alive until its consumer
        deletes it, or until the capsule itself goes if no one consumed it.
        """
    def __dlpack_device__(self: jitbridge.Tensor) -> tuple[int, int]:
        """
        (2, N): DLPack's numbers for cuda:N.
        """
    def __init__(self, *args, **kwargs) -> None:
        """
        Not made directly: empty(), zeros(), empty_like() and asarray() give Tensors. Raises TypeError.
        """
    def __repr__(self: jitbridge.Tensor) -> str:
        """
        The shape, dtype, device and address.
        """
    @property
    def __cuda_array_interface__(self) -> dict:
        """
        The CUDA array interface (v3), for Numba and CuPy; its 'stream' is the tensor's stream.
        """
    @property
    def device(self) -> str:
        """
        'cuda:N'.
        """
    @property
    def dtype(self) -> str:
        """
        The element type's name: 'float32', 'bfloat16', ...
        """
    @property
    def itemsize(self) -> int:
        """
        Bytes per element.
        """
    @property
    def nbytes(self) -> int:
        """
        size * itemsize.
        """
    @property
    def ndim(self) -> int:
        """
        len(shape).
        """
    @property
    def ptr(self) -> int:
        """
        The device address of element 0 (an int).
        """
    @property
    def shape(self) -> tuple:
        """
        The shape, a tuple of ints.
        """
    @property
    def size(self) -> int:
        """
        The number of elements.
        """
    @property
    def stream(self) -> int:
        """
        The stream the contents are ordered on, as the array API writes it (1: the legacy default stream, 2: the per-thread one, else the handle).
        """
    @property
    def strides(self) -> tuple:
        """
        Strides in elements.
        """
class _Configured:
    """
    kernel[grid, block]: a kernel with its launch configuration; call it with the kernel's arguments (keywords as for the kernel's own call).
    """
    def __call__(self, *args, **options):
        """
        Launches the kernel with the configuration of kernel[grid, block] (or [grid, block, stream,
        shared_mem]), Numba's form: one positional argument per kernel parameter, checked as kernel(grid,
        block, args) checks them; keyword options as for that call. Raises as that call does.
        """
    def __repr__(self) -> str:
        """
        <saxpy[(4, 1, 1), (256, 1, 1)]>: the kernel's name, grid and block.
        """
    @property
    def kernel(self) -> typing.Any:
        """
        The kernel this configuration launches.
        """
class _EventTimer:
    """
    Events recorded around samples on one stream (jitbridge/event_timer.hpp); used by jitbridge.benchmark. Not thread-safe.
    """
    def __init__(self, stream: typing.Any = None, args: tuple = (), device: typing.Any = None) -> None:
        """
        Raises TypeError/ValueError naming stream or device, NoDriverError without a driver.
        """
    def clear(self) -> None:
        """
        Forgets the samples (the events are reused).
        """
    def elapsed_ms(self) -> list[float]:
        """
        Waits for the last end event (the GIL released) and returns each sample's GPU milliseconds.
        """
    def flush_l2(self, bytes: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Writes `bytes` of a scratch buffer on the stream (cuMemsetD8Async), evicting L2.
        """
    def start(self) -> None:
        """
        Records the start event of a new sample on the stream.
        """
    def stop(self) -> None:
        """
        Records the end event of the open sample.
        """
    def synchronize(self) -> None:
        """
        Waits until the work queued on the stream is done (the GIL released).
        """
    @property
    def device(self) -> int:
        """
        The device ordinal.
        """
    @property
    def l2_cache_bytes(self) -> int:
        """
        The device's L2 cache size in bytes.
        """
    @property
    def samples(self) -> int:
        """
        Completed samples since the last clear().
        """
    @property
    def stream(self) -> int:
        """
        The stream the events are recorded on, as an int handle (1: the legacy default stream).
        """
class _Kernel:
    def __call__(self, *args, **options):
        """
        Launches the kernel, CuPy's form: kernel(grid, block, args, shared_mem=0, stream=None). grid and block
        are an int or a tuple of up to 3 ints; args a tuple or list with one entry per kernel parameter, each
        checked against the parameter's type. Keyword options: shared_mem, stream, cluster, cooperative,
        programmatic_dependent, check_args (the class says what each does). Runs on the consumer stream and
        never synchronizes the host. Raises TypeError/ValueError naming the argument that does not fit,
        LaunchError when the driver refuses the launch, NoDriverError without a driver.
        """
    def __getitem__(self, config: typing.Any) -> _Configured:
        """
        kernel[grid, block], kernel[grid, block, stream] or kernel[grid, block, stream, shared_mem] (Numba's form): the kernel with that launch configuration, to call with the kernel's arguments. grid and block are an int or up to 3 ints; stream None means the usual choice (the first array's framework's current stream). TypeError/ValueError for a malformed configuration.
        """
    def __init__(self, module: _Module, name: str) -> None:
        ...
    def __repr__(self) -> str:
        """
        <RawKernel saxpy(float const*, float*, int)>: the name and signature ('(...)' for kernels from files).
        """
    def max_active_blocks_per_sm(self, block_size: typing.SupportsIndex, shared_mem: typing.SupportsIndex = 0) -> int:
        """
        How many blocks of `block_size` threads using `shared_mem` bytes of dynamic shared memory fit on one multiprocessor of the current device (cuOccupancyMaxActiveBlocksPerMultiprocessor). ValueError for block_size < 1 or shared_mem out of range, NoDriverError without a driver, DriverError if the driver refuses.
        """
    def suggest_block_size(self, shared_mem: typing.SupportsIndex = 0, block_size_limit: typing.SupportsIndex = 0) -> tuple[int, int]:
        """
        (min_grid_size, block_size): the block size with the highest occupancy on the current device and the grid that fills it (cuOccupancyMaxPotentialBlockSize), for `shared_mem` bytes of dynamic shared memory per block and at most `block_size_limit` threads (0: no limit). Errors as max_active_blocks_per_sm.
        """
    @property
    def _module(self) -> _Module:
        ...
    @property
    def attributes(self) -> dict:
        """
        The driver's cuFuncGetAttribute values for this kernel on the current device, as a new dict (num_regs, max_threads_per_block, shared_size_bytes, const_size_bytes, local_size_bytes, ptx_version, binary_version, max_dynamic_shared_size_bytes, ...). Loads the module there on first use; NoDriverError without a driver, DriverError when loading fails.
        """
    @property
    def check_args(self) -> bool:
        """
        Whether launches check each argument against its parameter (default True). False: any array into any pointer (dtype, element count, alignment and read-only are not checked); host memory and arrays on another device are still refused. A call's check_args= overrides it.
        """
    @check_args.setter
    def check_args(self, arg1: typing.Any) -> None:
        ...
    @property
    def lowered_name(self) -> str:
        """
        The symbol in the binary (mangled for C++ kernels).
        """
    @property
    def name(self) -> str:
        """
        The kernel's name: as get_function() was given it, or the C++ name the program lists ('ns::scale'); for a template, the name expression ('scale<float>').
        """
    @property
    def resources(self) -> typing.Any:
        """
        What ptxas reported (Resources: registers, shared memory, spills), or None for kernels from files.
        """
    @property
    def signature(self) -> typing.Any:
        """
        The parameters as the compiler saw them (a Signature), or None for kernels from files.
        """
class _Module:
    @staticmethod
    def _from_image(arg0: bytes) -> _Module:
        ...
    def __init__(self, program: jitbridge.Program) -> None:
        ...
    def _global(self, arg0: str) -> tuple[int, int, int]:
        ...
    def kernel_names(self) -> list:
        """
        The kernels' names, as a new list (a file's module is loaded on the current device to list them).
        """
    @property
    def _image(self) -> typing.Any:
        """
        The bytes of a module loaded from a file (None for compiled ones); what pickling keeps.
        """
    @property
    def _targets(self) -> list:
        """
        The targets whose modules are loaded so far, in the order they were built.
        """
    @property
    def program(self) -> typing.Any:
        """
        The compiled Program, or None for a module loaded from a file.
        """
def _check_private_directory(path: str, create: bool = False) -> dict:
    """
    May code be loaded from directory `path`: the kernel cache's check (owned by the user, or a member of
    $JITBRIDGE_CACHE_TRUST_GROUP; writable by no one else; every ancestor owned by the user or root and, if
    writable by others, sticky). `create`: make it (mode 0700) and missing parents first. Returns a dict: ok,
    exists, path (absolute, symlinks resolved), problem (the rule broken, naming the directory; "" when ok),
    fix (a command that repairs it, or ""). For jitbridge.torch's add-on build cache; raises nothing but
    MemoryError.
    """
def _context_device() -> int:
    """
    The device whose context is current on this thread (0 when none): inside allocate(), the tensor's device.
    """
def _cuda_search() -> dict:
    """
    Where this process's CUDA components came from (runs the searches, loading NVRTC and nvJitLink, once):
    a dict with wheel_roots, include_dirs (what every compile gets as -I) and, for each of nvrtc, nvjitlink,
    cuda_headers, cccl_headers, libcuda, a dict: found, path, rule (what picked it: "JITBRIDGE_NVRTC",
    "wheel nvidia-cuda-nvrtc in <site-packages>", "CUDA_HOME", "/usr/local/cuda", "loader path", ...), version,
    note, error (an explicit setting that is wrong) and tried (the places tried before, each a dict of rule,
    path, why). Never raises for what is missing.
    """
def _enter_allocator_scope(allocator: typing.Any) -> typing_extensions.CapsuleType:
    ...
def _exit_allocator_scope(token: typing_extensions.CapsuleType) -> None:
    ...
def _inherit_vectorcall(cls: typing.Any, base: typing.Any) -> None:
    """
    Gives a Python subclass of a kernel type its base's vectorcall (when it does not override __call__).
    """
def _set_wheel_roots(roots: list) -> None:
    """
    The <site-packages>/nvidia/cu13 directories of this environment, in sys.path order, for the CUDA search (called by jitbridge/__init__.py before anything is loaded). RuntimeError once a search ran with others.
    """
def _xla_ffi_prepare(payload: bytes, device: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    Parses a jitbridge.jax call payload (bytes) into the FFI handler's table, compiles its kernels and loads them on CUDA device `device` (what XLA's initialize stage does), so modules are loaded before XLA runs or records the call. Raises RuntimeError with the reason (bad payload, compile error, no driver).
    """
def as_array(obj: typing.Any, stream: typing.Any = None) -> jitbridge.ArrayView:
    """
    A jitbridge.ArrayView of `obj` (no copy), for work on the consumer stream.
    
    Protocols, chosen once per type: the DLPack C exchange API (torch.Tensor), __dlpack__ (with the
    consumer stream and max_version=(1, 0), falling back to the legacy form), __cuda_array_interface__
    (v0 to v3), and jitbridge's own ArrayView and Tensor. Host (CPU) arrays work too; launches refuse
    them. The consumer stream: `stream` (an int handle, or an object with __cuda_stream__, .cuda_stream or
    .ptr) if given, else the current stream of obj's framework (torch, CuPy), else the legacy default
    stream; the producer's work is ordered before it (events, never a host sync). The view keeps that
    stream alive (later uses on other streams wait for it): a stream object itself, CuPy's current
    Stream; an int handle that is neither must outlive the view.
    Raises TypeError (no array protocol, bad types), ValueError (bad shapes, dtypes, pointers, versions)
    or BufferError (consumed or refused DLPack capsules, masks), each naming the problem.
    """
def asarray(x: typing.Any, device: typing.Any = None, stream: typing.Any = None, *, allocator: typing.Any = None) -> typing.Any:
    """
    A new jitbridge.Tensor holding a copy of the host array x (numpy.ndarray, anything with
    __dlpack__ in host memory, or a buffer such as array.array; any strides).
    
    device: None (the current CUDA device), an ordinal or 'cuda:N'. The memory is allocated and
    the copy queued on `stream` (None: the legacy default stream), and the host waits for the copy
    before returning, so x may change at once. A jitbridge.Tensor on that device comes back as it
    is. allocator: as for empty(). ValueError for device arrays (kernels take them as they are) and host devices; TypeError for
    objects that are not arrays or dtypes jitbridge does not know; NoDriverError without a driver.
    """
def cache_clear() -> int:
    """
    Remove every cache entry, in memory and on disk. Returns the number of disk entries removed. Programs already returned stay usable.
    """
def cache_info() -> dict:
    """
    The process-wide kernel cache, as a dict:
    directory       where entries are kept on disk ($JITBRIDGE_CACHE_DIR, else $XDG_CACHE_HOME/jitbridge,
                    else ~/.cache/jitbridge); read once, at the cache's first use in this process.
    disk            whether the disk side is on (off with JITBRIDGE_CACHE=0, or a directory that is unusable
                    or not private: another user's, writable by others, or under a directory others can
                    write without the sticky bit); the first call checks the directory.
    disk_reason     why disk is off ("" when on): the rule the directory broke and how to fix it.
    trust_group     $JITBRIDGE_CACHE_TRUST_GROUP: the group whose members share the directory, or None.
    entries, bytes  what the directory holds now (all processes' entries).
    memory_entries  programs this process holds in memory.
    compiles        compile() misses this process ran NVRTC for (one per program), since it started;
    links           link() misses it ran nvJitLink for;
    lock_waits      misses that found another process (or thread) compiling the same key and waited
                    for its entry (JITBRIDGE_CACHE_LOCK_TIMEOUT, default 300 s);
    lock_timeouts   waits that ran out and compiled themselves.
    """
def compile(code: str | bytes, *, options: collections.abc.Sequence[str] = (), name_expressions: collections.abc.Sequence[str] = (), headers: collections.abc.Mapping[str, str | bytes] | None = None, include_paths: collections.abc.Sequence[str | os.PathLike[str]] = (), arch: str | collections.abc.Sequence[str] | None = None, ptx: bool = False, program_name: str = 'kernel.cu') -> jitbridge.Program:
    """
    Compile CUDA C++ with NVRTC, or fetch the result from the kernel cache.
    
    code             the source, str or bytes.
    options          NVRTC options, e.g. ["-DN=4", "-std=c++17", "--use_fast_math"].
    name_expressions template instantiations and other names whose lowered names are wanted,
                     e.g. ["scale<float, 4>"]; each naming a __global__ function becomes a Kernel.
    headers          in-memory headers: {"config.h": "#define N 4"} lets the source #include "config.h".
    include_paths    extra include directories (str or os.PathLike).
    arch             "sm_90", "sm_90a", "compute_90", ...; None: the current GPU's, else $JITBRIDGE_ARCH,
                     else sm_90 (see default_arch()); kernels then build for each GPU's own architecture
                     at their first launch there. A list (["sm_80", "sm_90", "compute_90"]): a fat binary
                     (Program.fatbin) with one image per target, joined by nvFatbin (pip install
                     nvidia-nvfatbin; CudaNotFoundError without it); the driver picks the image per GPU.
    ptx              also keep the PTX text (Program.ptx).
    program_name     the file name diagnostics refer to.
    
    Returns a Program; NVRTC's warnings about it are issued as jitbridge.CompileWarning (once, when
    NVRTC compiles it: not for cache hits). Raises CompileError for errors in the source or options,
    ValueError for a malformed or unsupported arch, an empty source or an include path that is not a
    directory, NvrtcError when NVRTC itself fails, TypeError for arguments of the wrong type. The GIL
    is released while compiling.
    """
def default_arch() -> str:
    """
    The target compile() uses when arch is None: the current GPU's 'sm_XY' if a driver and a GPU are present, else $JITBRIDGE_ARCH, else 'sm_90'.
    """
def driver_info() -> dict:
    """
    The CUDA driver and its GPUs, as a dict:
    found    whether a usable driver was loaded (libcuda.so.1, cuInit).
    reason   why not, when found is False; else None.
    version  the driver's CUDA version as an int (13000 for 13.0), or None.
    devices  one dict per GPU: ordinal, name, compute_capability ("9.0"), arch ("sm_90"),
             total_memory (bytes).
    Raises DriverError if the driver fails while being asked about its devices.
    """
def empty(shape: typing.Any, dtype: typing.Any, device: typing.Any = None, stream: typing.Any = None, like: typing.Any = None, *, allocator: typing.Any = None) -> typing.Any:
    """
    An uninitialised array.
    
    Without `like`: a jitbridge.Tensor on `device` (None: the current CUDA device; an ordinal or
    'cuda:N'), allocated in stream order on `stream` (None: the legacy default stream). A stream
    object (CuPy or torch Stream, any __cuda_stream__ provider) is kept alive by the tensor; an int
    handle must outlive the tensor unless it is CuPy's current stream (whose Stream object is kept).
    With like=<array or array type> whose type has the DLPack exchange API (torch.Tensor): that
    framework allocates it (torch's caching allocator, on torch's current stream) and an object of
    that framework comes back; device may then be 'cpu'; `stream`, if given, waits for the
    framework's stream (allocator= is then a TypeError). dtype: 'float32', 'bfloat16', numpy or
    torch dtypes...
    allocator: where a jitbridge.Tensor's memory comes from for this call (None: the allocator that
    applies now, jitbridge.get_allocator(); jitbridge.allocators says how it is called). It is
    asked for the bytes on `stream`, and its deallocate(ptr, size, stream) gets the same stream
    when the tensor goes, after every stream the tensor was handed to.
    Raises TypeError/ValueError for bad arguments, NoDriverError without a driver, DriverError when
    the allocation fails.
    """
def empty_like(x: typing.Any, dtype: typing.Any = None, stream: typing.Any = None, *, allocator: typing.Any = None) -> typing.Any:
    """
    An uninitialised C-contiguous array with x's shape, device and dtype (or `dtype`).
    
    If type(x) has the DLPack exchange API (torch.Tensor), x's framework allocates it and returns its
    own type (a torch.Tensor, counted by torch.cuda.memory_allocated()). Otherwise a jitbridge.Tensor
    on x's device, allocated in stream order on the consumer stream (stream=, else x's framework's
    current stream, else the legacy default stream), which the tensor keeps alive (the stream= object,
    x's own, CuPy's current Stream), from `allocator` as empty() says. ValueError for host arrays of
    other frameworks.
    """
def from_ptr(ptr: typing.Any, shape: typing.Any, dtype: typing.Any, device: typing.Any = None, strides: typing.Any = None, owner: typing.Any = None, readonly: bool = False, stream: typing.Any = None) -> jitbridge.ArrayView:
    """
    A jitbridge.ArrayView over memory at address `ptr` (CuPy's UnownedMemory role).
    
    shape: int or sequence; dtype: a name ('float32', 'bfloat16'), a NumPy or torch dtype; device: None
    (the current CUDA device), an ordinal, 'cuda:N' or 'cpu'; strides: in elements, None for
    C-contiguous; owner: any object, kept alive as long as the view; stream: the stream the memory is
    ready on (None: the legacy default stream; a stream object is kept alive by the view, an int handle
    must outlive it unless it is CuPy's current stream). jitbridge does not free the memory: keep it valid
    while the view (or a launch using it) may read it, or pass its owner. Nothing is checked on the
    device. Raises TypeError for a ptr that is not an int, ValueError for a malformed shape, dtype,
    device or strides (each naming the argument).
    """
def get_allocator() -> typing.Any:
    """
    The allocator jitbridge's Tensors come from on this thread now: the innermost using_allocator()
    scope's, else the one set_allocator() made process-wide; None for jitbridge's own pool.
    """
def link(*args, arch: typing.Any = None, lto: typing.Any = None, options: typing.Any = (), device_runtime: typing.Any = None) -> jitbridge.Program:
    """
    Link programs and device code into one Program with nvJitLink (or fetch it from the cache).
    
    inputs          each one of: a Program compiled with options ('-dc',) / ('-rdc=true',) or ('-dlto',)
                    (its kernels keep their names and signatures); a path (str or os.PathLike) whose
                    extension says the kind (.cubin, .ptx, .ltoir, .fatbin, .a, .o); a (kind, bytes) or
                    (kind, bytes, name) tuple, kind one of 'cubin', 'ptx', 'ltoir', 'fatbin', 'library', 'object'.
    arch            'sm_90' & co.; None: the first program's arch, else default_arch().
    lto             link-time optimisation; None: on when an input is LTO-IR.
    options         more nvJitLink options: ['-O3'], ['-lineinfo'], ['-maxrregcount=64'], ...
    device_runtime  link libcudadevrt.a (dynamic parallelism): None: when an input needs it; True: always;
                    False: never.
    
    Returns a linked Program (Program.linked is True); its cubin property is linked once more, on first use, from
    the programs as their sources alone build them (no jitbridge symbols). Raises LinkError (undefined symbols named,
    demangled; error_log and info_log), ValueError for bad inputs (none, a program not compiled for
    linking, empty data, another arch, an unknown kind), TypeError for arguments of the wrong type,
    CudaNotFoundError when nvJitLink or a needed device runtime is missing. The GIL is released while linking.
    """
def nvrtc_library() -> str:
    """
    The NVRTC library in use: path, size and mtime (part of the cache key: two builds of one version differ). Raises CudaNotFoundError when none was found.
    """
def nvrtc_version() -> tuple[int, int]:
    """
    NVRTC's version as (major, minor). Raises CudaNotFoundError when no NVRTC 13 was found.
    """
def set_allocator(allocator: typing.Any) -> typing.Any:
    """
    Makes `allocator` the process-wide allocator of jitbridge's own Tensors; returns the previous one.
    
    allocator: None (jitbridge's stream-ordered pool, cuMemAllocAsync) or an object with
    allocate(size, stream) and deallocate(ptr, size, stream) (cuda.core's MemoryResource shape;
    jitbridge.allocators has adapters for CuPy, RMM and torch). Every thread without a
    using_allocator() scope uses it, and so do the C interface's alloc_async / free_async. See
    jitbridge.allocators for the protocol. TypeError when the object lacks those methods.
    """
def synchronize(device: typing.Any = None) -> None:
    """
    Wait for all work on a device (None: the current one; else an ordinal), every stream of it; the GIL is released while waiting. Raises LaunchError naming the last kernel if a kernel faulted, TypeError/ValueError for a device that is not an ordinal of this machine, NoDriverError without a driver.
    """
def toolkit_include_dirs() -> list:
    """
    The CUDA include directories added to every compile (cuda_fp16.h, cuda/std/...: from NVRTC's place, a wheel or a toolkit; see python -m jitbridge doctor); [] if none was found.
    """
def zeros(shape: typing.Any, dtype: typing.Any, device: typing.Any = None, stream: typing.Any = None, like: typing.Any = None, *, allocator: typing.Any = None) -> typing.Any:
    """
    As empty(), with the memory set to zero in stream order (cuMemsetD8Async on the array's stream).
    """
_c_api: typing.Any  # value = <capsule object "jitbridge._core._c_api">
_internals: typing.Any  # value = <capsule object "jitbridge._core._internals">
_xla_ffi_handler: typing.Any  # value = <capsule object "xla._CUSTOM_CALL_TARGET">
