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

import jax
import numpy as np

from ._jaxcall import TARGET, custom_call, launch_entry, static_number  # noqa: F401 (TARGET: jitbridge.jax.TARGET)
from ._jaxop import custom_op
from ._opdecl import Launch, OpDeclarationError, Output, numel, size
from ._opexpr import Check, cdiv, maximum, minimum, where

__all__ = ["kernel_call", "Out", "custom_op", "Launch", "Output", "Check", "numel", "size", "cdiv", "minimum",
           "maximum", "where", "OpDeclarationError"]


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
            arg = static_number(arg, f"{label}: {getattr(kernel, 'name', kernel)} argument {j} "
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
    launch = launch_entry(kernel, entries, grid, block, shared_mem, label)
    results = custom_call([launch], inputs, outs)
    return results[0] if len(results) == 1 else tuple(results)
