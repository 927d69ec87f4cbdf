"""_jaxop.py — jitbridge.jax.custom_op: an op declared as for jitbridge.torch.custom_op (the same Launch, Output,
numel, size, checked by the same _opspec.OpSpec), each phase one XLA custom call, differentiable through
jax.custom_vjp. Imported by jitbridge.jax (needs JAX)."""

import functools

import jax
import numpy as np

from ._opphase import _Value
from ._opspec import OpSpec
from .jax import _call, _launch_entry


class _Tensor:
    """A traced array as a declaration's callables see it (the parts of torch.Tensor's interface that rules use):
    shape, dtype, ndim, numel(), size(dim), dim(). ``slot``: ("in" | "out", index) in the custom call."""

    __slots__ = ("shape", "dtype", "slot")

    def __init__(self, shape, dtype, slot):
        self.shape, self.dtype, self.slot = tuple(int(d) for d in shape), np.dtype(dtype), slot

    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def __repr__(self):
        return f"<traced {self.dtype.name}{list(self.shape)}>"


def _value(v, env):
    """A phase's _Value (or a constant configuration) over ``env`` (name -> _Tensor or number), at trace time. The
    torch side writes the same values as Python source instead (_Value.source, _oprunner.py); here each is read once
    per trace, so there is nothing to compile."""
    if not isinstance(v, _Value):
        return v
    if v.kind == "name":
        return env[v.names[0]]
    if v.kind == "constant":
        return v.fn
    if v.kind == "query":
        t = env[v.fn.name]
        return t.numel() if v.fn.dim is None else t.shape[v.fn.dim]
    if v.kind == "all":
        return v.fn(**env)
    if v.kind == "positional":
        return v.fn(*[env[n] for n in v.names])
    return v.fn(**{n: env[n] for n in v.names})


def run_phase(phase, tensors, scalars):
    """Runs one phase as a custom call: ``tensors`` name -> JAX array for phase.tensor_args, ``scalars`` name ->
    Python number. Returns the phase's outputs (not its scratch tensors), a list. Raises TypeError for a dtype the
    phase's kernels do not take, naming the tensor; ValueError from the declaration's check."""
    label = f"{phase.op}: {phase.title}"
    key = None
    if phase.keyed:
        key = np.dtype(tensors[phase.dispatch].dtype).name
        if key not in phase.allowed:
            raise TypeError(f"{label}: {phase.dispatch} is {key}; the kernels take {', '.join(phase.allowed)}")
    required = phase.required[key]
    env, inputs = {}, []
    for n in phase.tensor_args:
        a = tensors[n]
        want = required.get(n)
        if want is not None and np.dtype(a.dtype).name != want:
            raise TypeError(f"{label}: {n} is {np.dtype(a.dtype).name}, the kernels take {want}")
        env[n] = _Tensor(a.shape, a.dtype, ("in", len(inputs)))
        inputs.append(a)
    env.update(scalars)
    if phase.check_getter is not None:
        _value(phase.check_getter, env)
    outs = []
    for rule in phase.outputs + phase.scratch:
        shape = env[rule.like].shape if rule.like is not None else tuple(_value(rule.shape, env))
        dtype = np.dtype(rule.dtype[1]) if rule.dtype[0] == "fixed" else env[rule.dtype[1]].dtype
        env[rule.name] = _Tensor(shape, dtype, ("out", len(outs)))
        outs.append(jax.ShapeDtypeStruct(env[rule.name].shape, dtype))
    launches = []
    for i, plan in enumerate(phase.launches, 1):
        grid = _value(plan.grid, env)
        if grid == 0 or (isinstance(grid, (tuple, list)) and 0 in grid):
            continue
        block, shared = _value(plan.block, env), _value(plan.shared_mem, env)
        kernel = plan.single if plan.single is not None else plan.kernels[key]
        args = []
        for g in plan.getters:
            v = _value(g, env)
            args.append((v.slot[0], v.slot[1], v.shape, v.dtype) if isinstance(v, _Tensor) else v)
        launches.append(_launch_entry(kernel, args, grid, block, shared, f"{label} launch {i}", check_const=False))
    return _call(launches, inputs, outs)[:len(phase.outputs)]


def custom_op(*, inputs, outputs, forward, save=(), backward=(), grads=None, scratch=None, check=None,
              contiguous=True, name=None):
    """An op for JAX from the declaration jitbridge.torch.custom_op takes (see docs/TORCH.md: inputs, outputs,
    forward, save, backward, grads, scratch, check); returns a function of the inputs in declared order (scalar
    inputs as Python numbers, fixed when traced) returning one array or a tuple. It works eagerly, under jax.jit and
    jax.vmap (one call per batch element), and, with backward=, under jax.grad / jax.vjp (jax.custom_vjp: the
    forward saves save=, the backward gets grad_<output>). ``contiguous`` is accepted for the shared declaration;
    JAX arrays are always dense. ``name`` labels errors. Raises OpDeclarationError for a declaration that cannot
    work (the same checks as the torch side)."""
    spec = OpSpec(name or "jitbridge.jax.custom_op", inputs=inputs, outputs=outputs, forward=forward, save=save,
                  backward=backward, grads=grads, scratch=scratch, check=check, contiguous=contiguous,
                  qualified=False)
    return _make_op(spec)


def _make_op(spec):
    names = [n for n, _ in spec.inputs]
    scalar_positions = tuple(i for i, (_, kind) in enumerate(spec.inputs) if kind != "Tensor")
    output_names = [n for n, _ in spec.outputs]
    single = len(output_names) == 1

    def split(args):
        if len(args) != len(names):
            raise TypeError(f"{spec.name}: takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
        tensors = {n: a for (n, kind), a in zip(spec.inputs, args) if kind == "Tensor"}
        scalars = {n: a for (n, kind), a in zip(spec.inputs, args) if kind != "Tensor"}
        return tensors, scalars

    def run_forward(args):
        tensors, scalars = split(args)
        return run_phase(spec.forward, tensors, scalars), tensors, scalars

    def shaped(outs):
        return outs[0] if single else tuple(outs)

    if spec.backward is None:
        def op(*args):
            return shaped(run_forward(args)[0])
        return op

    @functools.partial(jax.custom_vjp, nondiff_argnums=scalar_positions)
    def op(*args):
        return shaped(run_forward(args)[0])

    def op_fwd(*args):
        outs, tensors, _ = run_forward(args)
        produced = dict(zip(output_names, outs))
        saved = tuple(tensors[n] if n in tensors else produced[n] for n in spec.save)
        return shaped(outs), saved

    def op_bwd(*rest):
        scalar_values = rest[:len(scalar_positions)]
        saved, cotangents = rest[len(scalar_positions):]
        cotangents = (cotangents,) if single else tuple(cotangents)
        tensors = dict(zip(spec.save, saved))
        by_output = dict(zip(output_names, cotangents))
        for n in spec.grad_outputs:
            tensors[f"grad_{n}"] = by_output[n]
        scalars = {n: v for (n, _), v in zip(spec.scalar_inputs, scalar_values)}
        grads = dict(zip([f"grad_{n}" for n in spec.tensor_inputs if n in spec.grads],
                         run_phase(spec.backward, tensors, scalars)))
        # One cotangent per differentiable (tensor) input; None: zero (an input without a grads entry).
        return tuple(grads.get(f"grad_{n}") for n in spec.tensor_inputs)

    op.defvjp(op_fwd, op_bwd)

    def call(*args):
        if len(args) != len(names):  # before custom_vjp, which would fail on the missing scalar positions
            raise TypeError(f"{spec.name}: takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
        return op(*args)
    return call
