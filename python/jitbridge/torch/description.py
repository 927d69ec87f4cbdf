"""jitbridge/torch/description.py — an op declaration (OpSpec) written as the text the native runner
(jitbridge/torch_native/addon.cpp) parses: its phases with every rule as an expression (_opexpr.py), or the reason
it cannot run natively (then the Python runner runs it). Needs no torch."""

import numbers

from .._kernels import RawKernel
from .._opexpr import Checks, Expr, NotExpressible, ShapeProxy, TensorProxy, as_expr


class _Writer:
    def __init__(self):
        self.lines, self.kernels, self._kernel_index = [], [], {}

    def kernel(self, k):
        if id(k) not in self._kernel_index:
            self._kernel_index[id(k)] = len(self.kernels)
            self.kernels.append(k)
        return self._kernel_index[id(k)]


def _trace(value, env, what):
    """The Expr (or int/float, or tuple of them, or ShapeProxy) a phase Value gives over proxy ``env``."""
    try:
        return value(env)
    except NotExpressible as e:
        raise NotExpressible(f"{what}: {e}") from None
    except Exception as e:  # a rule doing something a stand-in cannot: a Python rule
        raise NotExpressible(f"{what}: calling it with stand-in tensors raised {type(e).__name__}: {e}") from None


def _tokens(value, what):
    try:
        return " ".join(as_expr(value).tokens)
    except NotExpressible as e:
        raise NotExpressible(f"{what} gave {e}") from None


def _dims(value, env, what):
    """Token strings of a grid/block (an int, a tuple, or a rule giving either)."""
    if callable(value):
        value = _trace(value, env, what)
    dims = value if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3:
        raise NotExpressible(f"{what} gave {len(dims)} dimensions")
    return [_tokens(d, what) for d in dims]


def describe(spec):
    """(description text, kernels it refers to by index) for ``spec``; raises NotExpressible with the reason when
    the declaration needs the Python runner."""
    w = _Writer()
    inputs = [n for n, _ in spec.inputs]
    outputs = [n for n, _ in spec.outputs]
    w.lines.append(f"op {spec.name} {len(inputs)} {len(outputs)}")
    w.lines.append("tensor_inputs " + " ".join(str(inputs.index(n)) for n in spec.tensor_inputs))
    if spec.backward is not None:
        for n in spec.save:
            w.lines.append(f"saved o {outputs.index(n)}" if n in outputs else f"saved i {inputs.index(n)}")
        w.lines.append("scalars " + " ".join(str(inputs.index(n)) for n, _ in spec.scalar_inputs))
        w.lines.append("grad_outputs " + " ".join(str(outputs.index(n)) for n in spec.grad_outputs))
        w.lines.append("grad_inputs " + " ".join(str(i) for i, n in enumerate(spec.tensor_inputs)
                                                  if n in spec.grads))
        w.lines.append(f"backward_op {spec.name}_backward")
    _phase(w, spec.forward, spec.contiguous)
    if spec.backward is not None:
        _phase(w, spec.backward, spec.contiguous)
    return "\n".join(w.lines) + "\n", w.kernels


def _phase(w, phase, contiguous):
    check = phase.check_getter.fn if phase.check_getter is not None else None
    if check is not None and not isinstance(check, Checks):
        raise NotExpressible(f"{phase.title}: check= is a Python callable (jitbridge.torch.Check runs in C++)")
    rules = phase.outputs + phase.scratch
    slot = {n: i for i, n in enumerate(phase.arg_names)}
    for r in rules:
        slot[r.name] = len(slot)
    kinds = {"Tensor": "T", "float": "f", "int": "i", "bool": "b"}
    env = {}
    for n, kind in phase.args:
        env[n] = TensorProxy(slot[n], n) if kind == "Tensor" else Expr((f"v{slot[n]}",), boolean=kind == "bool")
    for r in rules:
        env[r.name] = TensorProxy(slot[r.name], r.name)
    w.lines.append(f"phase {phase.title}")
    w.lines.append("args " + " ".join(kinds[k] for _, k in phase.args))
    w.lines.append("names " + " ".join(phase.arg_names))
    for c in check.checks if check is not None else ():
        what = f"check {c.message!r}"
        condition = _trace(lambda env: c.condition(**{n: env[n] for n in c.names}), env, what)
        shown = ",".join(str(slot[n]) for n in c.names if isinstance(env[n], TensorProxy)) or "-"
        w.lines.append(f"checkmsg {c.message}")
        w.lines.append(f"check {shown} {_tokens(condition, what)}")
    w.lines.append(f"dispatch {slot[phase.dispatch]}")
    w.lines.append(f"contiguous {int(contiguous)}")
    w.lines.append(f"keyed {int(phase.keyed)}")
    if phase.allowed:
        w.lines.append("allowed " + " ".join(phase.allowed))
    for key, required in phase.required.items():
        for n, d in required.items():
            if d is not None and n != phase.dispatch:
                w.lines.append(f"require {key or '*'} {slot[n]} {d}")
    returned = {r.name for r in phase.outputs}
    for r in rules:
        kind, source = r.dtype
        dtype = f"a{slot[source]}" if kind == "arg" else f"d{source}"
        head = f"out {slot[r.name]} {int(r.name in returned)} {dtype}"
        if r.like is not None:
            w.lines.append(f"{head} like {slot[r.like]}")
            continue
        what = f"{phase.title}: the shape of {r.name}"
        shape = _trace(r.shape, env, what) if r.shape.kind != "constant" else r.shape.fn
        if isinstance(shape, ShapeProxy):
            w.lines.append(f"{head} like {shape.slot}")
            continue
        if isinstance(shape, (Expr, numbers.Integral)):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)):
            raise NotExpressible(f"{what} is a {type(shape).__name__}, not a tuple")
        w.lines.append(f"{head} dims {len(shape)}")
        w.lines += [f"dim {_tokens(d, what)}" for d in shape]
    for i, plan in enumerate(phase.launches, 1):
        label = f"{phase.title} launch {i}"
        w.lines.append("launch")
        for key, kernel in plan.kernels.items():
            if not isinstance(kernel, RawKernel):
                raise NotExpressible(f"{label}: the kernel {kernel!r} is not a jitbridge.RawKernel")
            w.lines.append(f"kernel {key or '*'} {w.kernel(kernel)}")
        w.lines += ["grid " + t for t in _dims(plan.grid, env, f"{label}: grid")]
        w.lines += ["block " + t for t in _dims(plan.block, env, f"{label}: block")]
        shared = plan.shared_mem
        if callable(shared) or shared:
            value = _trace(shared, env, f"{label}: shared_mem") if callable(shared) else shared
            w.lines.append(f"shared {_tokens(value, f'{label}: shared_mem')}")
        for j, getter in enumerate(plan.getters):
            what = f"{label}: args[{j}]"
            if getter.kind == "name" and isinstance(env[getter.names[0]], TensorProxy):
                w.lines.append(f"arg slot {slot[getter.names[0]]}")
                continue
            value = getter.fn if getter.kind == "constant" else _trace(getter, env, what)
            if isinstance(value, (TensorProxy, ShapeProxy)):
                raise NotExpressible(f"{what} gives a tensor or a shape, not a number")
            boolean = isinstance(value, bool) or (isinstance(value, Expr) and value.boolean)
            w.lines.append(f"arg {'bool' if boolean else 'expr'} {_tokens(value, what)}")
        w.lines.append("endlaunch")
    w.lines.append("endphase")
