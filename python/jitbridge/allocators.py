"""jitbridge.allocators — where jitbridge's own Tensors get their memory (issue 28), and adapters for the memory pools
of CuPy, RMM and torch. Importing it (or jitbridge) imports none of those frameworks: each adapter imports its
framework the first time it allocates.

The protocol (cuda.core's MemoryResource shape), for any object:

    allocate(size, stream) -> an int device address, or a buffer object with an int .ptr or .handle
                              (and, if it says, .size or .nbytes >= size); kept alive until deallocate
    deallocate(ptr, size, stream) -> None

`stream` is an int as the array API writes it (1: the legacy default stream, 2: the per-thread one, else the
handle), passed positionally; a cuda.core MemoryResource itself wants a cuda.core Stream (keyword-only in recent
versions), so it needs a few lines of wrapper. allocate is called with the GIL, with the tensor's device current (cudaGetDevice() and
jitbridge.allocators.current_device() name it), on the stream the tensor is allocated on (the launch's or
the call's stream); the memory must be usable by work queued on that stream from then on, and aligned to
256 bytes. deallocate gets the allocation stream after it waited (an event) for every stream the tensor
was handed to, so a stream-ordered allocator may reuse the memory on that stream at once; the object
allocate returned is dropped after deallocate returns. deallocate runs when the last owner lets go: with the
GIL on the thread that dropped the tensor, or queued for the main thread when that thread lacks the GIL (a
framework's deleter thread); never during interpreter shutdown (the memory then goes with the process). An
exception from deallocate becomes a RuntimeWarning. Bad results of allocate raise TypeError/ValueError naming
`allocator`, after handing back what they can.

Which allocator applies: allocator= on empty / zeros / empty_like / asarray; else the innermost
using_allocator() scope of the calling thread (per thread, as cupy.cuda.using_allocator and
torch.cuda.use_mem_pool are); else the process-wide set_allocator(); else jitbridge's own stream-ordered pool
(cuMemAllocAsync). Copies jitbridge makes (__dlpack__(copy=True)) use the one that applies where they are
made. The C interface's alloc_async (native code) uses the process-wide one.
"""

import contextlib
import importlib

from . import _core
from ._bounded import bounded as _bounded

__all__ = ["set_allocator", "get_allocator", "using_allocator", "current_device", "CupyAllocator", "RmmAllocator",
           "TorchAllocator"]

set_allocator = _bounded(_core.set_allocator)
get_allocator = _bounded(_core.get_allocator)


@contextlib.contextmanager
def using_allocator(allocator):
    """A scope (with-block) in which jitbridge's Tensors made on this thread come from `allocator` (None: jitbridge's
    own pool). The previous choice comes back when the block ends, also on an exception; scopes nest. Per thread:
    other threads keep theirs. TypeError when `allocator` lacks allocate/deallocate."""
    token = _core._enter_allocator_scope(allocator)
    try:
        yield allocator
    finally:
        _core._exit_allocator_scope(token)


def current_device():
    """Inside allocate(): the ordinal of the device the memory is for (the device whose context is current)."""
    return _core._context_device()


def _framework(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ImportError(f"jitbridge.allocators: this adapter needs {name}, which is not importable: {e}") from e


class CupyAllocator:
    """CuPy's current allocator (cupy.cuda.alloc): its memory pool and limit, cupy.cuda.set_allocator /
    using_allocator, RMM's rmm_cupy_allocator, a pool shared with torch through pytorch-pfn-extras. The memory is
    allocated on the requested stream (CuPy's pool keeps it on that stream's free list) and goes back to the pool
    when jitbridge drops CuPy's MemoryPointer, after deallocate."""

    def allocate(self, size, stream):
        """A cupy.cuda.MemoryPointer of `size` bytes on the current device, allocated with `stream` as CuPy's
        current stream. ImportError without CuPy; what CuPy raises (OutOfMemoryError)."""
        cupy = _framework("cupy")
        handle = 0 if stream == 1 else stream   # CuPy writes the legacy default stream 0
        with cupy.cuda.Device(current_device()):
            if cupy.cuda.get_current_stream().ptr == handle:
                return cupy.cuda.alloc(size)
            with cupy.cuda.ExternalStream(handle):
                return cupy.cuda.alloc(size)

    def deallocate(self, ptr, size, stream):
        """Nothing to do: the MemoryPointer allocate returned holds the memory, and dropping it frees it."""

    def __repr__(self):
        return "jitbridge.allocators.CupyAllocator()"


class _StreamHandle:
    """A raw stream handle as the __cuda_stream__ protocol gives it (for RMM's Stream)."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class RmmAllocator:
    """RMM: an rmm.DeviceBuffer from `mr` (None: rmm.mr.get_current_device_resource() of the device, at each
    allocation), on the requested stream; freed on that stream when jitbridge drops it, after deallocate."""

    def __init__(self, mr=None):
        """mr: an rmm.mr memory resource, or None for the current device resource at each allocation."""
        self.mr = mr

    @staticmethod
    def _stream(stream):
        """RMM's Stream for a protocol int: its default-stream constants, else a wrapper of the handle (through
        __cuda_stream__ where this RMM takes it, else a CuPy or Numba external stream, which older RMMs take)."""
        streams = None
        for name in ("rmm.pylibrmm.stream", "rmm._cuda.stream"):
            try:
                streams = importlib.import_module(name)
                break
            except ImportError:
                continue
        if streams is None:
            raise ImportError("jitbridge.allocators.RmmAllocator: this RMM has no stream module "
                              "(rmm.pylibrmm.stream or rmm._cuda.stream)")
        if stream == 1:
            return getattr(streams, "LEGACY_DEFAULT_STREAM", streams.DEFAULT_STREAM)
        if stream == 2 and hasattr(streams, "PER_THREAD_DEFAULT_STREAM"):
            return streams.PER_THREAD_DEFAULT_STREAM
        try:
            return streams.Stream(_StreamHandle(stream))
        except TypeError:
            pass
        for wrap in (lambda: importlib.import_module("cupy").cuda.ExternalStream(stream),
                     lambda: importlib.import_module("numba.cuda").external_stream(stream)):
            try:
                return streams.Stream(wrap())
            except (ImportError, TypeError):
                continue
        raise TypeError(f"jitbridge.allocators.RmmAllocator: this RMM cannot wrap stream {stream:#x} (it takes "
                        f"__cuda_stream__ objects in newer versions, CuPy or Numba streams in older ones)")

    def allocate(self, size, stream):
        """An rmm.DeviceBuffer of `size` bytes on `stream`. ImportError without RMM; what RMM raises."""
        rmm = _framework("rmm")
        kwargs = {"size": size, "stream": self._stream(stream)}
        if self.mr is not None:
            kwargs["mr"] = self.mr
        return rmm.DeviceBuffer(**kwargs)

    def deallocate(self, ptr, size, stream):
        """Nothing to do: the DeviceBuffer allocate returned frees itself (on its stream) when it is dropped."""

    def __repr__(self):
        return f"jitbridge.allocators.RmmAllocator(mr={self.mr!r})"


class TorchAllocator:
    """torch's CUDA caching allocator (torch.cuda.caching_allocator_alloc / _delete): the memory counts in
    torch.cuda.memory_allocated() and is cached for torch's own tensors afterwards; allocated on the requested
    stream, whose reuse torch orders as for its tensors."""

    def allocate(self, size, stream):
        """The address of `size` bytes from torch's caching allocator on the current device and `stream`.
        ImportError without torch; what torch raises (torch.cuda.OutOfMemoryError)."""
        torch = _framework("torch")
        return torch.cuda.caching_allocator_alloc(size, current_device(), 0 if stream == 1 else stream)

    def deallocate(self, ptr, size, stream):
        """Gives `ptr` back to torch's cache (torch orders its reuse after the allocation stream's work)."""
        _framework("torch").cuda.caching_allocator_delete(ptr)

    def __repr__(self):
        return "jitbridge.allocators.TorchAllocator()"
