"""_jaxop.py — jitbridge.jax.custom_op: an op declared as for jitbridge.torch.custom_op (the same Launch, Output,
numel, size, checked by the same _opspec.OpSpec), each phase one XLA custom call, differentiable through
jax.custom_vjp, batched under jax.vmap by a declared rule (``batch=``) or one call per element. Imported by
jitbridge.jax (needs JAX)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from ._opdecl import OpDeclarationError
from ._opspec import OpSpec
from ._jaxcall import custom_call, launch_entry, static_number


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
    """A phase's rule over ``env`` (name -> _Tensor or number), at trace time: the declaration's Value evaluates
    itself (_opphase.py, the evaluator the torch runners share); a configuration given as a constant is itself."""
    return v(env) if callable(v) else v


def _plan(phase, shapes, scalars):
    """One call of ``phase`` over ``shapes`` (name -> (shape, dtype) for each of phase.tensor_args) and ``scalars``
    (name -> Python number): (its results as ShapeDtypeStructs, outputs then scratch tensors; its launch entries).
    Nothing runs. Raises TypeError for a dtype the phase's kernels do not take, naming the tensor; ValueError from
    the declaration's check."""
    label = f"{phase.op}: {phase.title}"
    key = None
    if phase.keyed:
        key = np.dtype(shapes[phase.dispatch][1]).name
        if key not in phase.allowed:
            raise TypeError(f"{label}: {phase.dispatch} is {key}; the kernels take {', '.join(phase.allowed)}")
    required = phase.required[key]
    env = {}
    for i, n in enumerate(phase.tensor_args):
        shape, dtype = shapes[n]
        want = required.get(n)
        if want is not None and np.dtype(dtype).name != want:
            raise TypeError(f"{label}: {n} is {np.dtype(dtype).name}, the kernels take {want}")
        env[n] = _Tensor(shape, dtype, ("in", i))
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
        launches.append(launch_entry(kernel, args, grid, block, shared, f"{label} launch {i}", check_const=False))
    return outs, launches


def _shapes(phase, arrays):
    return {n: (tuple(a.shape), a.dtype) for n, a in zip(phase.tensor_args, arrays)}


def run_phase(phase, tensors, scalars, fold=frozenset()):
    """Runs one phase as a custom call: ``tensors`` name -> JAX array for phase.tensor_args, ``scalars`` name ->
    Python number. Returns the phase's outputs (not its scratch tensors), a list. ``fold``: the tensors whose
    leading batch dimension the phase's kernels handle (custom_op's batch=); under jax.vmap the call then runs once
    on the batched arrays (_batched); without, once per batch element."""
    count = len(phase.outputs)

    def direct(*arrays):
        outs, launches = _plan(phase, _shapes(phase, arrays), scalars)
        return custom_call(launches, list(arrays), outs)[:count]

    inputs = [tensors[n] for n in phase.tensor_args]
    if not fold:
        return direct(*inputs)
    batched = custom_vmap(direct)
    batched.def_vmap(functools.partial(_batched, phase, scalars, fold, batched, direct))
    return list(batched(*inputs))


def _batched(phase, scalars, fold, batched, direct, axis_size, in_batched, *arrays):
    """jax.vmap's rule for one phase call (jax.custom_batching.custom_vmap; batch dimensions come first). When every
    batched tensor is in ``fold``, one call on the batched arrays (fold tensors without a batch dimension broadcast
    to one), after checking that each output then carries the batch dimension in front of what one element's call
    gives; otherwise one call per element. Raises ValueError naming the output a declared rule does not fit."""
    names = phase.tensor_args
    if any(b and n not in fold for n, b in zip(names, in_batched)):
        outs = jax.vmap(direct, in_axes=[0 if b else None for b in in_batched])(*arrays)
        return list(outs), [True] * len(outs)
    folded = [a if b or n not in fold else jnp.broadcast_to(a, (axis_size,) + tuple(a.shape))
              for n, a, b in zip(names, arrays, in_batched)]
    one = _plan(phase, {n: (tuple(a.shape[1:]) if b else tuple(a.shape), a.dtype)
                        for n, a, b in zip(names, arrays, in_batched)}, scalars)[0]
    whole = _plan(phase, _shapes(phase, folded), scalars)[0]
    for rule, e, w in zip(phase.outputs, one, whole):
        if w.shape != (axis_size,) + e.shape or w.dtype != e.dtype:
            raise ValueError(
                f"{phase.op}: {phase.title}: batch= folds jax.vmap's batch dimension into "
                f"{', '.join(n for n in names if n in fold)}, but then {rule.name} is {w.dtype.name}{list(w.shape)} "
                f"where the batch needs {e.dtype.name}{[axis_size, *e.shape]} (one element's result with the batch "
                f"in front): its rule does not carry the batch dimension. Leave the {phase.title} out of batch= "
                f"(batch={{'forward': (...)}} names the phases that fold) to run it once per batch element")
    return list(batched(*folded)), [True] * len(phase.outputs)


def _fold_names(spec, batch):
    """custom_op's batch= as phase title -> frozenset of the tensor names it folds. ``batch``: None, a name or a
    tuple of names (for every phase that has them), or a dict "forward"/"backward" -> names."""
    phases = {"forward": spec.forward}
    if spec.backward is not None:
        phases["backward"] = spec.backward
    if batch is None:
        return {}
    per_phase = isinstance(batch, dict)
    if per_phase:
        unknown = [t for t in batch if t not in phases]
        if unknown:
            raise OpDeclarationError(f"{spec.name}: batch= has {unknown[0]!r}; its keys are the op's phases "
                                     f"({', '.join(phases)})")
        wanted = dict(batch)
    else:
        wanted = {t: batch for t in phases}
    folds = {}
    for title, names in wanted.items():
        names = (names,) if isinstance(names, str) else names
        if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
            raise OpDeclarationError(f"{spec.name}: batch= takes a tensor name, a tuple of them or a dict phase -> "
                                     f"names, got {batch!r}")
        known = phases[title].tensor_args
        if per_phase:
            for n in names:
                if n not in known:
                    raise OpDeclarationError(f"{spec.name}: batch= {title}: {n!r} is not a tensor the {title} "
                                             f"takes ({', '.join(known)})")
        folds[title] = frozenset(n for n in names if n in known)
    if not per_phase:
        everything = {n for p in phases.values() for n in p.tensor_args}
        for n in batch if not isinstance(batch, str) else (batch,):
            if n not in everything:
                raise OpDeclarationError(f"{spec.name}: batch= names {n!r}, a tensor no phase takes "
                                         f"({', '.join(sorted(everything))})")
    return {t: f for t, f in folds.items() if f}


def custom_op(*, inputs, outputs, forward, save=(), backward=(), grads=None, scratch=None, check=None,
              contiguous=True, batch=None, name=None):
    """An op for JAX from the declaration jitbridge.torch.custom_op takes (see docs/TORCH.md: inputs, outputs,
    forward, save, backward, grads, scratch, check); returns a function of the inputs in declared order returning
    one array or a tuple. It works eagerly, under jax.jit and jax.vmap, and, with backward=, under jax.grad /
    jax.vjp (jax.custom_vjp: the forward saves save=, the backward gets grad_<output>).

    Scalar inputs are Python (or NumPy, or concrete 0-d JAX) numbers, fixed when traced: a traced scalar (an
    argument of the jitted function, or one vmap maps over) raises TypeError naming it; make it static
    (static_argnums) or declare it a Tensor input read through a const pointer.

    batch       jax.vmap's rule. None (the default): one call per batch element. A tensor name or a tuple of names
                (or a dict "forward"/"backward" -> names, per phase): the tensors whose leading batch dimension the
                kernels handle as part of their size, e.g. an elementwise kernel over numel("x"). A phase call whose
                batched tensors are all named then runs once on the batched arrays (a named tensor without a batch
                dimension is broadcast), with the declaration's rules (Output(like=), numel, grid callables) seeing
                the batched shapes; each output must then be one element's output with the batch in front (checked
                when traced: ValueError naming the output, e.g. a gradient that sums over rows). A call with a
                batched tensor not named runs once per element.
    contiguous  accepted for the shared declaration; JAX arrays are always dense.
    name        labels errors.

    Raises OpDeclarationError for a declaration that cannot work (the same checks as the torch side, and batch=
    naming a tensor no phase takes)."""
    spec = OpSpec(name or "jitbridge.jax.custom_op", inputs=inputs, outputs=outputs, forward=forward, save=save,
                  backward=backward, grads=grads, scratch=scratch, check=check, contiguous=contiguous,
                  qualified=False)
    return _make_op(spec, _fold_names(spec, batch))


def _make_op(spec, folds):
    names = [n for n, _ in spec.inputs]
    scalar_positions = tuple(i for i, (_, kind) in enumerate(spec.inputs) if kind != "Tensor")
    output_names = [n for n, _ in spec.outputs]
    single = len(output_names) == 1

    def run_forward(args):
        tensors = {n: a for (n, kind), a in zip(spec.inputs, args) if kind == "Tensor"}
        scalars = {n: a for (n, kind), a in zip(spec.inputs, args) if kind != "Tensor"}
        return run_phase(spec.forward, tensors, scalars, folds.get("forward", frozenset())), tensors, scalars

    def shaped(outs):
        return outs[0] if single else tuple(outs)

    def checked(args):
        if len(args) != len(names):  # before custom_vjp, which would fail on the missing scalar positions
            raise TypeError(f"{spec.name}: takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
        args = list(args)
        for i in scalar_positions:
            n, kind = spec.inputs[i]
            args[i] = static_number(args[i], f"{spec.name}: scalar input {n!r} ({kind})",
                                    "or declare it a Tensor input read through a const pointer")
        return args

    if spec.backward is None:
        def call(*args):
            return shaped(run_forward(checked(args))[0])
        return call

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
                         run_phase(spec.backward, tensors, scalars, folds.get("backward", frozenset()))))
        # One cotangent per differentiable (tensor) input; None: zero (an input without a grads entry).
        return tuple(grads.get(f"grad_{n}") for n in spec.tensor_inputs)

    op.defvjp(op_fwd, op_bwd)

    def call(*args):
        return op(*checked(args))
    return call
