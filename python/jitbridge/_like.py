"""_like.py — outputs from the allocator of the framework they are like (issue 28): empty / zeros (like=) and
empty_like of a cupy.ndarray allocate with CuPy (its current allocator: its pool, cupy.cuda.set_allocator, RMM's CuPy
allocator; on CuPy's current stream) and return a cupy.ndarray; of a Numba DeviceNDArray, with Numba's memory manager
(RMM's Numba plugin too) and return a DeviceNDArray. The types are recognised exactly, never importing a framework;
everything else goes to the compiled functions as before (torch through the DLPack exchange API)."""

import functools
import sys

__all__ = ["with_framework_allocators"]

_NUMBA_ARRAYS = "numba.cuda.cudadrv.devicearray"


def _framework(like):
    """'cupy', 'numba' or None: the framework whose exact array type `like` is (or is an instance of)."""
    t = like if isinstance(like, type) else type(like)
    cupy = sys.modules.get("cupy")
    if cupy is not None and t is getattr(cupy, "ndarray", None):
        return "cupy"
    numba_arrays = sys.modules.get(_NUMBA_ARRAYS)
    if numba_arrays is not None and t is getattr(numba_arrays, "DeviceNDArray", None):
        return "numba"
    return None


def _numpy_dtype(dtype, fn):
    try:
        return sys.modules["numpy"].dtype(dtype)   # loaded with CuPy and Numba
    except TypeError as e:
        raise TypeError(f"{fn}(dtype): {dtype!r} is no NumPy dtype, which CuPy and Numba arrays need") from e


def _cupy_empty(shape, dtype, device, stream, zero, fn):
    """cupy.empty / cupy.zeros on `device` (None: CuPy's current one); `stream`, if given, waits for CuPy's stream."""
    cupy = sys.modules["cupy"]
    make = cupy.zeros if zero else cupy.empty
    if device is None or device == cupy.cuda.runtime.getDevice():
        out = make(shape, dtype=dtype)
    else:
        with cupy.cuda.Device(device):
            out = make(shape, dtype=dtype)
    if stream is not None:
        # the explicit stream orders itself after the allocation (and the zeros) on CuPy's stream
        with cupy.cuda.Device(out.device.id):
            cupy.cuda.ExternalStream(_stream_handle(stream, fn)).wait_event(cupy.cuda.get_current_stream().record())
    return out


def _numba_empty(shape, dtype, stream, zero, like, fn):
    """Numba's device_array in Numba's current context, on the stream given, else the one `like` is bound to."""
    cuda = sys.modules["numba.cuda"]
    bound = getattr(like, "stream", 0) if not isinstance(like, type) else 0
    on = cuda.external_stream(_stream_handle(stream, fn)) if stream is not None else bound
    out = cuda.device_array(shape, dtype=dtype, stream=on)
    if zero and out.size:
        sys.modules["numba.cuda.cudadrv.driver"].device_memset(out, 0, out.nbytes, stream=on)
    return out


def _stream_handle(stream, fn):
    if isinstance(stream, bool) or not isinstance(stream, int):
        handle = getattr(stream, "ptr", None) or getattr(stream, "cuda_stream", None)
        if handle is None:
            raise TypeError(f"{fn}(stream): with a CuPy or Numba array, stream must be an int handle or a CuPy/torch "
                            f"stream, got a {type(stream).__name__}")
        return handle
    return {0: 1, 1: 1}.get(stream, stream)   # 0 and 1: the legacy default stream


def _device_ordinal(device, fn):
    if device is None:
        return None
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    text = str(device)
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    if text == "cuda":
        return None
    raise ValueError(f"{fn}(device): {text!r}: a CuPy array goes on a CUDA device (an ordinal or 'cuda:N')")


def _refuse_allocator(fn, allocator, framework):
    if allocator is not None:
        raise TypeError(f"{fn}(allocator): {'CuPy' if framework == 'cupy' else 'Numba'} allocates arrays like this "
                        f"one itself; allocator= applies to jitbridge.Tensor outputs (leave one of them out)")


def with_framework_allocators(empty, zeros, empty_like):
    """empty, zeros and empty_like that allocate with CuPy/Numba for their arrays, else call the ones given."""

    def allocate(fn, shape, dtype, device, stream, like, zero, allocator, fallback):
        framework = _framework(like) if like is not None else None
        if framework is None:
            return fallback()
        _refuse_allocator(fn, allocator, framework)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dtype = _numpy_dtype(dtype, fn)
        if framework == "cupy":
            return _cupy_empty(shape, dtype, _device_ordinal(device, fn), stream, zero, fn)
        return _numba_empty(shape, dtype, stream, zero, like, fn)

    @functools.wraps(empty)
    def empty_(shape, dtype, device=None, stream=None, like=None, *, allocator=None):
        return allocate("empty", shape, dtype, device, stream, like, False, allocator,
                        lambda: empty(shape, dtype, device=device, stream=stream, like=like, allocator=allocator))

    @functools.wraps(zeros)
    def zeros_(shape, dtype, device=None, stream=None, like=None, *, allocator=None):
        return allocate("zeros", shape, dtype, device, stream, like, True, allocator,
                        lambda: zeros(shape, dtype, device=device, stream=stream, like=like, allocator=allocator))

    @functools.wraps(empty_like)
    def empty_like_(x, dtype=None, stream=None, *, allocator=None):
        framework = _framework(x)
        if framework is None:
            return empty_like(x, dtype=dtype, stream=stream, allocator=allocator)
        _refuse_allocator("empty_like", allocator, framework)
        if framework == "cupy" and stream is None:
            cupy = sys.modules["cupy"]
            device = x.device.id
            if device == cupy.cuda.runtime.getDevice():   # the common case, as cheap as cupy.empty_like
                return cupy.empty(x.shape, dtype=x.dtype if dtype is None else _numpy_dtype(dtype, "empty_like"))
        dtype = x.dtype if dtype is None else _numpy_dtype(dtype, "empty_like")
        if framework == "cupy":
            return _cupy_empty(x.shape, dtype, x.device.id, stream, False, "empty_like")
        return _numba_empty(x.shape, dtype, stream, False, x, "empty_like")

    note = ("\n\nLike a cupy.ndarray (x, or like=): CuPy allocates it (its current allocator: pool, set_allocator, "
            "RMM) on its current stream and a cupy.ndarray comes back; `stream`, if given, waits for CuPy's stream. "
            "Like a Numba DeviceNDArray: Numba's memory manager allocates it (in Numba's current context, on `stream` "
            "or the array's bound stream). dtype must then be a NumPy dtype.")
    for wrapper in (empty_, zeros_, empty_like_):
        wrapper.__doc__ = (wrapper.__doc__ or "") + note
    return empty_, zeros_, empty_like_
