"""_jaxcall.py — the XLA custom call behind jitbridge.jax: the FFI handler of _core (jitbridge/xla_ffi.hpp)
registered as its target, the JSON payload a call carries (its launches, each naming its kernel by compile request
and kernel name) and the trace-time checks of launch arguments. Used by jitbridge.jax.kernel_call and by _jaxop.py's
custom_op (needs JAX)."""

import hashlib
import json
import os

import jax
import numpy as np

from . import _core
from ._opdecl import FLOATING

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


def static_number(value, what, instead):
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


def launch_entry(kernel, args, grid, block, shared_mem, label, check_const=True):
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


def encode_payload(launches):
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


def custom_call(launches, inputs, outputs):
    """The custom call: ``inputs`` (arrays) -> results of ``outputs`` (ShapeDtypeStructs), a list."""
    if not outputs:
        raise ValueError("jitbridge.jax: a call needs at least one result")
    payload = encode_payload(launches)
    _prepare(payload)
    call = jax.ffi.ffi_call(TARGET, outputs, vmap_method="sequential")
    return list(call(*inputs, jitbridge=payload, jitbridge_key=payload_key(payload)))


def payload_key(payload):
    """The call's "jitbridge_key": a digest of the payload, which the handler looks calls up by (hashing 32 bytes per
    execution rather than the payload, whose kernel sources may be kilobytes)."""
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).hexdigest()
