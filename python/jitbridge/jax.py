"""jitbridge.jax — jitbridge kernels inside ``jax.jit``, ``jax.grad`` and ``jax.vmap``, as XLA custom calls run by
the FFI handler compiled into _core (jitbridge/xla_ffi.hpp). Importing this module imports JAX and registers the
handler (``import jitbridge`` alone never imports JAX).

- ``kernel_call(kernel, *args, grid=, block=)``: one kernel; ``Out(...)`` entries in ``args`` are its results.
- ``custom_op(inputs=, outputs=, forward=, ...)``: an op from the declaration jitbridge.torch.custom_op takes (the
  same Launch, Output, Check, numel, size, cdiv, minimum, maximum, where and the same checks, _opspec.OpSpec),
  differentiable through ``jax.custom_vjp``, batched under ``jax.vmap`` by a declared rule (``batch=``).

A call names its kernels by their compile request (source, options, name expressions, headers, arch) and kernel
name, never by a pointer, so a program from JAX's persistent compilation cache runs in a new process (the kernel
comes from jitbridge's cache there). Launch arguments are fixed when the function is traced: array shapes are static
in JAX, and a by-value parameter takes a Python number (a traced scalar is refused, naming it; a 0-d array into a
``const T*`` parameter is read on the device instead). Under ``jax.vmap`` a call runs once per batch element
(vmap_method "sequential") unless custom_op's ``batch=`` declares that its kernels handle the batch dimension."""

import hashlib
import json
import os

import jax
import numpy as np

from . import _core
from ._opdecl import FLOATING, Launch, OpDeclarationError, Output, numel, size
from ._opexpr import Check, cdiv, maximum, minimum, where

__all__ = ["kernel_call", "Out", "custom_op", "Launch", "Output", "Check", "numel", "size", "cdiv", "minimum",
           "maximum", "where", "OpDeclarationError"]

#: The name the handler is registered under (platform CUDA): the target of every jitbridge custom call.
TARGET = "jitbridge_xla_ffi"
_PAYLOAD_VERSION = 1


def _register():
    handler = _core._xla_ffi_handler
    # The initialize stage loads modules before XLA records a command buffer; JITBRIDGE_JAX_STAGES=execute registers
    # the execute stage alone (for a jaxlib that refuses per-stage handlers: modules then load at the first call).
    if os.environ.get("JITBRIDGE_JAX_STAGES", "initialize,execute") == "execute":
        jax.ffi.register_ffi_target(TARGET, handler, platform="CUDA", api_version=1)
        return
    try:
        jax.ffi.register_ffi_target(TARGET, {"initialize": handler, "execute": handler}, platform="CUDA",
                                    api_version=1)
    except Exception:  # a jaxlib without per-stage dicts (its error type varies): the execute stage alone
        jax.ffi.register_ffi_target(TARGET, handler, platform="CUDA", api_version=1)


_register()


class Out:
    """A result of kernel_call: ``Out(like=array)`` (its shape and dtype), ``Out(shape=(..), dtype=...)``, or
    ``Out(like=array, dtype=...)``. Written by the kernel; its contents start undefined (the kernel must write all)."""

    __slots__ = {"shape": "The result's shape, a tuple of ints.", "dtype": "The result's dtype, a numpy.dtype."}

    def __init__(self, like=None, *, shape=None, dtype=None):
        """``like``: an array (or anything with .shape and .dtype) whose shape, and dtype unless ``dtype`` is given,
        the result takes; or ``shape`` (a tuple of ints >= 0) with ``dtype``. Raises TypeError for a missing or
        malformed shape or dtype."""
        if (like is None) == (shape is None):
            raise TypeError("Out: give exactly one of like= (an array) and shape= (a tuple of ints)")
        if like is not None:
            shape, dtype = like.shape, like.dtype if dtype is None else dtype
        if dtype is None:
            raise TypeError("Out(shape=...): dtype= is required")
        if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
            raise TypeError(f"Out: shape= takes ints >= 0, got {shape!r}")
        self.shape, self.dtype = tuple(int(d) for d in shape), np.dtype(dtype)

    def __repr__(self):
        return f"Out(shape={self.shape}, dtype={self.dtype.name})"


def _static_number(value, what, instead):
    """``value`` for a by-value kernel parameter: Python numbers pass; a concrete 0-d array (NumPy or JAX) gives its
    number. A traced 0-d value raises TypeError naming ``what`` and saying what to do (``instead``: the alternative
    that reads it on the device). Anything else is returned for the parameter's own check."""
    if isinstance(value, jax.core.Tracer):
        if getattr(value, "ndim", None) == 0:
            raise TypeError(f"{what} is a traced value ({value.aval.str_short()}) inside jax.jit, jax.vmap or "
                            f"jax.grad; kernels take it by value, fixed when the function is traced: pass a Python "
                            f"number (mark the argument static: jax.jit(f, static_argnums=...) or functools.partial), "
                            f"{instead}")
        return value
    if isinstance(value, (jax.Array, np.ndarray, np.generic)) and np.ndim(value) == 0:
        return np.asarray(value).item()
    return value


def _dims(value, what, label):
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
                                          for d in dims):
        raise TypeError(f"{label}: {what}= takes an int or a tuple of 1 to 3 ints >= 0, got {value!r}")
    return [int(d) for d in dims] + [1] * (3 - len(dims))


def _request(kernel, label):
    """The compile request of a RawKernel as the payload keeps it. TypeError for kernels that have none."""
    module = getattr(kernel, "_module", None)
    program = getattr(module, "program", None)
    request = getattr(program, "_request", None)
    if request is None or not hasattr(kernel, "signature"):
        raise TypeError(f"{label}: {kernel!r} is not a jitbridge.RawKernel compiled from source (kernels loaded from "
                        f"files have no source for XLA to rebuild them from in another process)")
    if request["include_paths"]:
        raise ValueError(f"{label}: the kernel was compiled with include_paths={request['include_paths']!r}; an XLA "
                         f"call rebuilds kernels from their source, options and headers only: pass the headers with "
                         f"headers= instead")
    if request["ptx"]:
        raise ValueError(f"{label}: the kernel was compiled with ptx=True; compile it to a cubin (the default)")
    try:
        source = request["code"].decode("utf-8")
        headers = [[n, t.decode("utf-8")] for n, t in request["headers"]]
    except UnicodeDecodeError as e:
        raise ValueError(f"{label}: the kernel's source or a header is not UTF-8 text ({e})") from None
    return {"source": source, "options": list(request["options"]), "name_expressions":
            list(request["name_expressions"]), "headers": headers, "arch": request["arch"], "kernel": kernel.name}


def _scalar_entry(value, param, where):
    """["int"|"uint"|"float"|"bool", value] for a constant going to a by-value parameter."""
    dtype = param.dtype
    if param.kind == "pointer" or param.rank:
        raise TypeError(f"{where}: parameter ({param.spelling}) takes an array, got {value!r}")
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, bool) or dtype == "bool":
        if not isinstance(value, (bool, int)):
            raise TypeError(f"{where}: parameter ({param.spelling}) takes a bool, got {value!r}")
        return ["bool", bool(value)]
    if dtype in FLOATING:
        if not isinstance(value, (int, float)):
            raise TypeError(f"{where}: parameter ({param.spelling}) takes a float, got {value!r}")
        return ["float", float(value)]
    if dtype is not None and dtype.startswith(("int", "uint")):
        if not isinstance(value, int):
            raise TypeError(f"{where}: parameter ({param.spelling}) takes an int, got {value!r}")
        return ["uint" if dtype.startswith("uint") and value >= 0 else "int", value]
    raise TypeError(f"{where}: parameter ({param.spelling}) is not a number jitbridge.jax can pass (int, float, "
                    f"bool scalars only)")


def _array_entry(shape, dtype, is_output, param, where, check_const=True):
    """Checks an array against a pointer or tensor-view parameter (what the handler's launch checks again).
    check_const False: an op's phase, whose const-ness rules _opphase.Phase checked at declaration."""
    if param.kind != "pointer" and not param.rank:
        raise TypeError(f"{where}: parameter ({param.spelling}) is a value, not a pointer; got an array")
    name = np.dtype(dtype).name
    if param.dtype is not None and name != param.dtype:
        raise TypeError(f"{where} ({param.spelling}): expected {param.dtype}, got {name}")
    if param.rank and len(shape) != param.rank:
        raise ValueError(f"{where} ({param.spelling}): expected an array of rank {param.rank}, got shape {shape}")
    if param.lanes > 1 and int(np.prod(shape, dtype=np.int64)) % param.lanes:
        raise ValueError(f"{where} ({param.spelling}): the element count must be a multiple of {param.lanes}")
    if not check_const:
        return
    if is_output and param.element_const:
        raise ValueError(f"{where} ({param.spelling}): a result goes to a const pointer, which the kernel cannot "
                         f"write; drop the const")
    if not is_output and not param.element_const:
        raise ValueError(f"{where} ({param.spelling}): an input array (read-only in JAX) goes to a non-const "
                         f"pointer; declare the parameter const, or make this argument an Out(...)")


def _launch_entry(kernel, args, grid, block, shared_mem, label, check_const=True):
    """One launch of the payload. ``args``: per kernel parameter ("in", i, shape, dtype), ("out", i, shape, dtype)
    or a Python number."""
    entry = _request(kernel, label)
    params = list(kernel.signature.params)
    if len(params) != len(args):
        raise TypeError(f"{label}: {kernel.name} takes {len(params)} arguments {kernel.signature}, got {len(args)}")
    encoded = []
    for j, (arg, p) in enumerate(zip(args, params)):
        where = f"{label}: {kernel.name} argument {j}"
        if isinstance(arg, tuple):
            kind, index, shape, dtype = arg
            _array_entry(shape, dtype, kind == "out", p, where, check_const)
            encoded.append([kind, index])
        else:
            encoded.append(_scalar_entry(arg, p, where))
    if not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
        raise TypeError(f"{label}: shared_mem= takes an int >= 0, got {shared_mem!r}")
    entry.update(grid=_dims(grid, "grid", label), block=_dims(block, "block", label), shared_mem=int(shared_mem),
                 check_args=bool(getattr(kernel, "check_args", True)), args=encoded)
    return entry


def _payload(launches):
    return json.dumps({"v": _PAYLOAD_VERSION, "launches": launches}, separators=(",", ":"))


def _prepare(payload):
    """Loads the payload's kernels on every local CUDA device now, at trace time, before XLA runs or records the
    call (XLA's initialize stage does it again, cheaply). Nothing without a CUDA backend (lowering only); a compile
    or load failure raises RuntimeError here rather than inside XLA."""
    try:
        devices = jax.local_devices(backend="cuda")
    except (RuntimeError, ValueError):  # no CUDA backend (the error type differs between JAX versions)
        return
    data = payload.encode("utf-8")
    for d in devices:
        _core._xla_ffi_prepare(data, d.local_hardware_id)


def _call(launches, inputs, outputs):
    """The custom call: ``inputs`` (arrays) -> results of ``outputs`` (ShapeDtypeStructs), a list."""
    if not outputs:
        raise ValueError("jitbridge.jax: a call needs at least one result")
    payload = _payload(launches)
    _prepare(payload)
    call = jax.ffi.ffi_call(TARGET, outputs, vmap_method="sequential")
    return list(call(*inputs, jitbridge=payload, jitbridge_key=_key(payload)))


def _key(payload):
    """The call's "jitbridge_key": a digest of the payload, which the handler looks calls up by (hashing 32 bytes per
    execution rather than the payload, whose kernel sources may be kilobytes)."""
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).hexdigest()


def kernel_call(kernel, *args, grid, block, shared_mem=0):
    """Calls a jitbridge.RawKernel on JAX arrays, eagerly or inside jax.jit / jax.vmap; returns its results (one
    array per ``Out`` in ``args``, a tuple when there are several).

    args        one entry per kernel parameter: a JAX array (an input; the parameter must be a const pointer or a
                ``jitbridge::Tensor<const T, N>`` view), an ``Out(...)`` (a result the kernel writes), or a number
                for a by-value parameter (Python, NumPy or a concrete 0-d JAX array; fixed when traced, so a traced
                scalar raises TypeError naming the argument: make it static, or pass it as a 0-d array to a
                ``const T*`` parameter).
    grid, block an int or a tuple of up to 3 ints (a zero dimension skips the launch).

    Checked when traced (TypeError/ValueError naming the argument): the argument count, each array's dtype, rank
    and const-ness against the signature, scalars against their parameter. The launch runs on XLA's stream of the
    array's device; a launch failure is raised by JAX at the next synchronisation. Under jax.vmap the call runs
    once per batch element; for kernels that handle the batch themselves use custom_op's batch= (or wrap your
    function in jax.custom_batching.custom_vmap).
    """
    label = "jitbridge.jax.kernel_call"
    inputs, outs, entries = [], [], []
    params = list(getattr(getattr(kernel, "signature", None), "params", ()))
    for j, arg in enumerate(args):
        if j < len(params) and params[j].kind != "pointer" and not params[j].rank and not isinstance(arg, Out):
            arg = _static_number(arg, f"{label}: {getattr(kernel, 'name', kernel)} argument {j} "
                                      f"({params[j].spelling})",
                                 "or pass a 0-d array to a const pointer parameter (it is then read on the device)")
        if isinstance(arg, Out):
            entries.append(("out", len(outs), arg.shape, arg.dtype))
            outs.append(jax.ShapeDtypeStruct(arg.shape, arg.dtype))
        elif isinstance(arg, (jax.Array, np.ndarray)) or hasattr(arg, "aval"):
            entries.append(("in", len(inputs), tuple(arg.shape), arg.dtype))
            inputs.append(arg)
        else:
            entries.append(arg)
    if not outs:
        raise ValueError(f"{label}: no Out(...) among the arguments: a custom call must return a result")
    launch = _launch_entry(kernel, entries, grid, block, shared_mem, label)
    results = _call([launch], inputs, outs)
    return results[0] if len(results) == 1 else tuple(results)


from ._jaxop import custom_op  # noqa: E402  (the op built on the pieces above)
