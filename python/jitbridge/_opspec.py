"""_opspec.py — a whole jitbridge.torch op declaration checked (OpSpec: inputs, outputs, save list, gradients, the
forward and backward phases) before torch is imported. The pieces it is declared from are in _opdecl.py, the checks
of one phase against its kernels in _opphase.py."""

from ._opdecl import DTYPE_NAMES, SCALAR_KINDS, Launch, OpDeclarationError, Output, numel, size, shown
from ._opexpr import Check, Checks
from ._opphase import ALL_NAMES, Phase, names_asked

__all__ = ["OpDeclarationError", "Launch", "Output", "numel", "size", "OpSpec", "DTYPE_NAMES"]


def _referenced(launches, rules):
    """Every name that ``launches`` and Output ``rules`` refer to; ALL_NAMES when a callable takes **kwargs."""
    rules = [r for r in rules if isinstance(r, Output)]
    names = {r.like for r in rules} | {r.dtype[1] for r in rules if r.dtype}
    items = [a for launch in launches for a in launch.args + (launch.grid, launch.block, launch.shared_mem)]
    for item in items + [r.shape for r in rules]:
        if isinstance(item, str):
            names.add(item)
        elif callable(item):
            asked = names_asked(item)
            if asked is ALL_NAMES:
                return ALL_NAMES
            names |= asked
    return names


def _identifier(name, what, op):
    if not isinstance(name, str) or not name.isidentifier():
        raise OpDeclarationError(f"{op}: {what} {shown(name)} is not a valid name")
    if name.startswith("grad_"):
        raise OpDeclarationError(f"{op}: {what} {shown(name)}: names starting with grad_ are reserved for gradients")
    return name


class OpSpec:
    """A checked op declaration (see jitbridge.torch.custom_op): its inputs (name, kind) in call order, outputs,
    save list, the forward Phase and the backward Phase (None without backward=). Raises OpDeclarationError."""

    def __init__(self, name, *, inputs, outputs, forward, save=(), backward=(), grads=None, scratch=None,
                 check=None, contiguous=True, qualified=True):
        if qualified and (not isinstance(name, str) or name.count("::") != 1
                          or not all(part.isidentifier() for part in name.split("::"))):
            raise OpDeclarationError(f"op name {shown(name)}: expected 'namespace::name', "
                                     f"e.g. 'mylib::fused_bias_gelu'")
        self.name, self.contiguous = name, bool(contiguous)
        for what, value in (("inputs", inputs), ("save", save)):
            if isinstance(value, (str, bytes)):  # tuple() would take it one character at a time
                raise TypeError(f"{name}: {what}= takes a tuple of names, got the str {value[:80]!r}; "
                                f"write {what}=({value[:80]!r},)")
        self.inputs = self._parse_inputs(inputs)
        self.tensor_inputs = tuple(n for n, kind in self.inputs if kind == "Tensor")
        self.scalar_inputs = tuple((n, kind) for n, kind in self.inputs if kind != "Tensor")
        if not isinstance(outputs, dict) or not outputs:
            raise OpDeclarationError(f"{name}: outputs= takes a dict name -> Output with at least one entry")
        self.outputs = [(_identifier(n, "output", name), r) for n, r in outputs.items()]
        scratch = dict(scratch or {})
        for n in scratch:
            _identifier(n, "scratch tensor", name)
        self._check_unique([n for n, _ in self.inputs] + [n for n, _ in self.outputs] + list(scratch))
        if isinstance(check, Check):
            check = Checks((check,))
        elif isinstance(check, (tuple, list)) and check and all(isinstance(c, Check) for c in check):
            check = Checks(check)
        if check is not None and not callable(check):
            raise OpDeclarationError(f"{name}: check= takes a callable, got {shown(check)}")
        forward = _launches(forward, name, "forward")
        if not forward:
            raise OpDeclarationError(f"{name}: forward= needs at least one Launch")
        backward = _launches(backward, name, "backward")
        grads = dict(grads) if grads is not None else None
        if backward and not grads:
            raise OpDeclarationError(f"{name}: backward= is given without grads=; declare the gradient tensors it "
                                     f"writes, e.g. grads={{'x': Output(like='x')}}")
        if grads and not backward:
            raise OpDeclarationError(f"{name}: grads= is given without backward=; give the launches that write "
                                     f"{', '.join('grad_' + g for g in grads)}")
        output_names = [n for n, _ in self.outputs]
        self.save = tuple(save)
        for n in self.save:
            if n not in self.tensor_inputs and n not in output_names:
                kind = "a scalar input (scalars reach the backward by themselves)" if n in dict(self.scalar_inputs) \
                    else "not a tensor input or an output"
                raise OpDeclarationError(f"{name}: save= names {shown(n)}, which is {kind}")
        for g in grads or ():
            if g not in self.tensor_inputs:
                raise OpDeclarationError(f"{name}: grads= has an entry for {shown(g)}, which is not a tensor input")
        self.grads = grads or {}
        grad_unavailable = {f"grad_{n}": "gradients exist only in backward launches"
                            for n in output_names + list(self.tensor_inputs)}
        self.forward = Phase(name, "forward", self.inputs, {n: "dispatch" for n in self.tensor_inputs},
                             self.outputs, scratch, forward, grad_unavailable, check)
        self.backward = self._backward_phase(backward, scratch) if backward else None

    def _parse_inputs(self, inputs):
        if isinstance(inputs, str) or not inputs:
            raise OpDeclarationError(f"{self.name}: inputs= takes a tuple of names, e.g. ('x', 'bias', 'alpha: float')")
        parsed = []
        for entry in inputs:
            if not isinstance(entry, str):
                raise OpDeclarationError(f"{self.name}: input {shown(entry)} is not a str")
            n, _, kind = entry.partition(":")
            kind = kind.strip() or "Tensor"
            if kind not in ("Tensor",) + SCALAR_KINDS:
                raise OpDeclarationError(f"{self.name}: input {shown(entry)}: "
                                         f"the kind must be Tensor, float, int or bool")
            parsed.append((_identifier(n.strip(), "input", self.name), kind))
        return parsed

    def _check_unique(self, names):
        seen = set()
        for n in names:
            if n in seen:
                raise OpDeclarationError(f"{self.name}: the name {shown(n)} is declared twice "
                                         f"(inputs, outputs, scratch)")
            seen.add(n)

    def _backward_phase(self, launches, scratch):
        output_rules = dict(self.outputs)
        output_source = {}
        for n, rule in self.outputs:
            dtype = rule.dtype
            output_source[n] = dtype[1] if dtype is not None and dtype[0] == "fixed" else "dispatch"
        asked = _referenced(launches, list(self.grads.values()) + list(scratch.values()))
        args, sources = [], {}
        for n in self.save:
            args.append((n, "Tensor"))
            sources[n] = output_source.get(n, "dispatch")
        self.grad_outputs = tuple(n for n in output_rules if f"grad_{n}" in asked)
        for n in self.grad_outputs:
            args.append((f"grad_{n}", "Tensor"))
            sources[f"grad_{n}"] = output_source[n]
        args += list(self.scalar_inputs)
        unavailable = {n: f"{n} is not saved for the backward: add it to save=" for n in
                       list(self.tensor_inputs) + list(output_rules) if n not in self.save}
        unavailable.update({f"grad_{n}": f"grad_{n} has no entry in grads=" for n in self.tensor_inputs
                            if n not in self.grads})
        grads = [(f"grad_{n}", self.grads[n]) for n in self.tensor_inputs if n in self.grads]
        phase = Phase(self.name, "backward", args, sources, grads, scratch, launches, unavailable)
        if self.forward.allowed is not None and phase.allowed is not None:
            missing = [d for d in self.forward.allowed if d not in phase.allowed]
            if missing:
                raise OpDeclarationError(f"{self.name}: the backward has no kernels for {', '.join(missing)} (the "
                                         f"forward takes {', '.join(self.forward.allowed)})")
        return phase


def _launches(value, op, title):
    if value is None:
        return []
    launches = [value] if isinstance(value, Launch) else list(value)
    for launch in launches:
        if not isinstance(launch, Launch):
            raise OpDeclarationError(f"{op}: {title}= takes a Launch or a sequence of Launches, got {shown(launch)}")
    return launches
