"""_opphase.py — one phase (forward or backward) of a jitbridge.torch op, checked against its kernels' signatures:
names resolved, pointer parameters matched to tensors (const-ness, pointee dtypes), and bound into launch plans."""

import numbers

from ._opdecl import (FLOATING, Launch, OpDeclarationError, Output, Query, callable_names, kernel_name, kernels_label,
                      shown)


def _tensor_param(p):
    """(takes a tensor, the dtype it must have or None for any, element is const) for one signature Param, as the
    launch checks read it (Param.dtype, lanes, rank, element_const come from the core). Vector pointees (float4*)
    take more than one dtype (float32 in a multiple of 4, or float32x4): None here, the launch checks them."""
    if p.kind == "pointer" or p.rank:
        return True, p.dtype if p.lanes == 1 else None, bool(p.element_const)
    return False, None, False


class Value:
    """Something a phase computes from its names (a launch argument, a grid/block/shared_mem rule, an output shape,
    the check): a name's value, a constant, ``numel``/``size`` of a tensor (``query``), or a callable given the
    names it asks for by position, by keyword or all of them (``all``). ``Value(env)`` evaluates it over a dict
    of names (the native runner's tracer, jitbridge/torch/description.py, calls it with stand-in tensors);
    ``source(local, bind, defined)`` writes it as a Python expression over local variables (the compiled runner,
    jitbridge/torch/compiled.py)."""

    __slots__ = ("kind", "fn", "names", "_call")

    def __init__(self, kind, fn, names):
        self.kind, self.fn, self.names = kind, fn, names
        if kind == "name":
            only = names[0]
            self._call = lambda env: env[only]
        elif kind == "constant":
            self._call = lambda env: fn
        elif kind == "query":
            self._call = fn.env_getter()
        elif kind == "all":
            self._call = lambda env: fn(**env)
        elif kind == "positional":
            self._call = lambda env: fn(*[env[n] for n in names])
        else:
            self._call = lambda env: fn(**{n: env[n] for n in names})

    def __call__(self, env):
        return self._call(env)

    def source(self, local, bind, defined):
        """This value as an expression: ``local(name)`` spells a name's variable, ``bind(obj)`` a constant object,
        ``defined`` lists the names a callable taking ``**kwargs`` gets."""
        if self.kind == "name":
            return local(self.names[0])
        if self.kind == "constant":
            return bind(self.fn)
        if self.kind == "query":
            t = local(self.fn.name)
            return f"{t}.numel()" if self.fn.dim is None else f"{t}.shape[{int(self.fn.dim)}]"
        f = bind(self.fn)
        if self.kind == "all":
            return f"{f}(**{{{', '.join(f'{n!r}: {local(n)}' for n in defined)}}})"
        if self.kind == "positional":
            return f"{f}({', '.join(local(n) for n in self.names)})"
        return f"{f}({', '.join(f'{n}={local(n)}' for n in self.names)})"


class _Rule:
    """One Output rule of a phase, resolved: the tensor it copies the shape of (``like``) or else a shape getter over
    the phase's names (``shape``), where its dtype comes from (``('arg', name)``: the dtype of that tensor argument;
    ``('fixed', dtype name)``), and the tensor argument whose device it goes on (``device_of``)."""

    __slots__ = ("name", "like", "shape", "dtype", "device_of")

    def __init__(self, name, like, shape, dtype, device_of):
        self.name, self.like, self.shape, self.dtype, self.device_of = name, like, shape, dtype, device_of


class _LaunchPlan:
    """A Launch bound to a phase's names: kernel per dtype key, a Value for each argument, and the configuration
    (grid, block, shared_mem: each a Value or a constant). The compiled runner (jitbridge/torch/compiled.py) writes
    its launch."""

    __slots__ = ("kernels", "single", "getters", "grid", "block", "shared_mem")

    def __init__(self, launch, getters, grid, block, shared_mem):
        self.kernels = launch.kernels
        self.single = launch.kernels.get(None)
        self.getters, self.grid, self.block, self.shared_mem = getters, grid, block, shared_mem


class Phase:
    """The forward or the backward of an op, checked: its arguments (name, kind) in call order, the tensor whose
    dtype picks kernels (``dispatch``), output and scratch rules, launch plans, the dtypes it accepts
    (``allowed``: a tuple, or None for any) and per dtype the dtype each tensor argument must have
    (``required[key]``)."""

    def __init__(self, op, title, args, arg_sources, outputs, scratch, launches, unavailable, check=None):
        self.op, self.title = op, title
        self.args = list(args)
        self.arg_names = tuple(n for n, _ in self.args)
        self.tensor_args = tuple(n for n, kind in self.args if kind == "Tensor")
        if not self.tensor_args:
            raise self._error("needs at least one tensor argument")
        self.dispatch = next((n for n in self.tensor_args if arg_sources[n] == "dispatch"), self.tensor_args[0])
        self._arg_sources = arg_sources
        self._unavailable = unavailable
        self._known = set(self.arg_names) | {n for n, _ in outputs} | set(scratch)
        self._tensors = set(self.tensor_args) | {n for n, _ in outputs} | set(scratch)
        self.outputs = [self._rule(name, rule, f"{self._out_what} {shown(name)}") for name, rule in outputs]
        self.launches, used = [], set()
        for i, launch in enumerate(launches, 1):
            self.launches.append(self._plan(i, launch, used))
        self.scratch = [self._rule(n, r, f"scratch {shown(n)}") for n, r in scratch.items() if n in used]
        # env -> check(...) with the names it asks for; None without a check.
        self.check_getter = self._getter(check, "check", set(self.arg_names)) if check is not None else None
        key_sets = {tuple(sorted(l.kernels)) for l in launches if l.keyed}
        if len(key_sets) > 1:
            raise self._error("the kernel dicts of its launches cover different dtypes: "
                              + "; ".join(f"launch {i}: {', '.join(l.kernels)}" for i, l in enumerate(launches, 1)
                                          if l.keyed))
        self.keyed = bool(key_sets)
        keys = list(next(iter(key_sets))) if key_sets else [None]
        for key in keys:
            self._check_writes(launches, key)
        self.required = {key: self._dtypes_for(key, launches) for key in keys}
        if self.keyed:
            self.allowed = tuple(keys)
        else:
            only = self.required[None].get(self.dispatch)
            self.allowed = (only,) if only else None

    @property
    def _out_what(self):
        return "output" if self.title == "forward" else "gradient"

    def _error(self, message):
        return OpDeclarationError(f"{self.op}: {self.title}: {message}")

    def _resolve(self, name, where, allowed):
        if name in allowed:
            return
        reason = self._unavailable.get(name)
        if reason is None and name in self._known:
            reason = f"{shown(name)} cannot be used here; this sees only {', '.join(sorted(allowed))}"
        elif reason is None:
            reason = f"unknown name {shown(name)}; the {self.title} knows {', '.join(sorted(allowed))}"
        raise self._error(f"{where}: {reason}")

    def _getter(self, fn, where, allowed):
        """A Value calling fn with the names it asks for (checked against ``allowed``), by position where the
        signature allows it (a keyword call costs a dict per call)."""
        named, takes_all = callable_names(fn)
        names, positional = [], True
        for name, required, by_position in named:
            if name in allowed:
                names.append(name)
                positional = positional and by_position
            else:
                if required:
                    self._resolve(name, f"{where} ({shown(fn)}) asks for {shown(name)}", allowed)
                positional = False  # a skipped parameter: later ones must go by keyword
        if isinstance(fn, Query):
            return Value("query", fn, (fn.name,))
        if takes_all:
            return Value("all", fn, ())
        return Value("positional" if positional else "keywords", fn, tuple(names))

    def _rule(self, name, rule, where):
        if not isinstance(rule, Output):
            raise self._error(f"{where}: expected an Output rule, got {shown(rule)}")
        args = set(self.arg_names)
        shape = None        # like= rules copy the shape of their tensor
        if rule.like is not None:
            self._resolve(rule.like, f"{where}: like={shown(rule.like)}", set(self.tensor_args))
        elif callable(rule.shape):
            shape = self._getter(rule.shape, f"{where}: shape=", args)
        else:
            shape = Value("constant", rule.shape, ())
        if rule.dtype is None:
            dtype = ("arg", rule.like or self.dispatch)
        elif rule.dtype[0] == "tensor":
            self._resolve(rule.dtype[1], f"{where}: dtype={shown(rule.dtype[1])}", set(self.tensor_args))
            dtype = ("arg", rule.dtype[1])
        else:
            dtype = rule.dtype
        return _Rule(name, rule.like, shape, dtype, self.dispatch)

    def _plan(self, index, launch, used):
        if not isinstance(launch, Launch):
            raise self._error(f"launch {index}: expected a Launch, got {shown(launch)}")
        label = f"{self.title} launch {index} ({kernels_label(launch)})"
        getters = []
        for j, arg in enumerate(launch.args):
            where = f"{label}: args[{j}]"
            if isinstance(arg, str):
                self._resolve(arg, where, self._known)
                used.add(arg)
                getters.append(Value("name", None, (arg,)))
            elif isinstance(arg, numbers.Number):
                getters.append(Value("constant", arg, ()))
            elif callable(arg):
                getters.append(self._getter(arg, where, self._known))
                self._note_used(arg, used)
            else:
                raise self._error(f"{where} is {shown(arg)}: use a tensor or scalar name, a number, or a callable")
        configs = []
        for what in ("grid", "block", "shared_mem"):
            value = getattr(launch, what)
            if callable(value):
                configs.append(self._getter(value, f"{label}: {what}=", self._known))
                self._note_used(value, used)
            else:
                configs.append(value)
        for key, kernel in launch.kernels.items():
            self._check_signature(launch, key, kernel, label)
        return _LaunchPlan(launch, tuple(getters), *configs)

    def _note_used(self, fn, used):
        """Adds to ``used`` the phase's names that callable ``fn`` asks for (its signature read once)."""
        asked = names_asked(fn)
        used.update(n for n in self._known if n in asked)

    def _arg_description(self, arg):
        if isinstance(arg, str):
            return f"the {'tensor' if arg in self._tensors else 'scalar input'} {shown(arg)}"
        return f"the constant {shown(arg)}" if not callable(arg) else f"the callable {shown(arg)} (it gives a scalar)"

    def _check_signature(self, launch, key, kernel, label):
        sig = getattr(kernel, "signature", None)
        if sig is None:  # loaded from a binary: no types to check against
            return
        where = label if key is None else f"{label}, the {key} kernel {kernel_name(kernel)}"
        params = list(sig.params)
        if len(params) != len(launch.args):
            raise self._error(f"{where}: the kernel takes {len(params)} parameters {sig}, but args= has "
                              f"{len(launch.args)} entries {shown(launch.args)}")
        for j, (arg, p) in enumerate(zip(launch.args, params)):
            takes_tensor = _tensor_param(p)[0]
            is_tensor = isinstance(arg, str) and arg in self._tensors
            if is_tensor and not takes_tensor:
                raise self._error(f"{where}: args[{j}] is {self._arg_description(arg)}, but parameter {j} "
                                  f"({p.spelling}) is a value, not a pointer")
            if not is_tensor and takes_tensor:
                raise self._error(f"{where}: args[{j}] is {self._arg_description(arg)}, but parameter {j} "
                                  f"({p.spelling}) takes a tensor: pass a tensor name")

    def _tensor_uses(self, launch, key):
        """(name, parameter index, Param) for each tensor argument of the kernel used for ``key``."""
        kernel = launch.kernels[key] if launch.keyed else launch.kernels[None]
        sig = getattr(kernel, "signature", None)
        if sig is None:
            return kernel, None
        return kernel, [(arg, j, p) for j, (arg, p) in enumerate(zip(launch.args, sig.params))
                        if isinstance(arg, str) and arg in self._tensors]

    def _check_writes(self, launches, key):
        """Inputs only through const pointers; each output written (non-const) before it is read (const)."""
        outputs = [r.name for r in self.outputs]
        written = set()
        for i, launch in enumerate(launches, 1):
            kernel, uses = self._tensor_uses(launch, key)
            if uses is None:  # no signature: any pointer may be written
                written.update(a for a in launch.args if isinstance(a, str))
                continue
            for name, j, p in uses:
                const = _tensor_param(p)[2]
                where = f"{self.title} launch {i} ({kernel_name(kernel)}): args[{j}] {shown(name)}"
                if name in self.arg_names and not const:
                    raise self._error(f"{where} goes into parameter {j} ({p.spelling}), which is not const; an op "
                                      f"must not write its inputs: declare the parameter const")
                if name in outputs and const and name not in written:
                    raise self._error(f"{where} goes into const parameter {j} ({p.spelling}) before any launch "
                                      f"writes it; a {self._out_what} must be written through a non-const pointer")
                if not const:
                    written.add(name)
        for name in outputs:
            if name not in written:
                what = "declared gradient" if self.title == "backward" else "output"
                raise self._error(f"{what} {name} is written by no {self.title} launch (it must go into a "
                                  f"non-const pointer parameter)")

    def _dtypes_for(self, key, launches):
        """Checks every tensor's dtype against its pointee types for dtype ``key``; returns the dtype each tensor
        argument must have (None: any)."""
        uses = []
        for i, launch in enumerate(launches, 1):
            kernel, found = self._tensor_uses(launch, key)
            uses += [(i, kernel, name, j, p, _tensor_param(p)[1]) for name, j, p in found or ()]
        required = {n: key if self._arg_sources[n] == "dispatch" else self._arg_sources[n] for n in self.tensor_args}
        # Arguments whose dtype the kernel fixes, at their first typed use: with plain kernels (no dtype key) every
        # argument that follows the dispatch dtype; with a key, those besides the dispatch tensor that go into a
        # non-floating pointee (an int64 index tensor, say).
        fixed = {}
        for i, kernel, name, j, p, pointee in uses:
            if (name in required and name not in fixed and pointee is not None
                    and self._arg_sources[name] == "dispatch"
                    and (key is None or (name != self.dispatch and pointee not in FLOATING))):
                fixed[name] = pointee
        required.update(fixed)
        expected = dict(required)
        for rule in self.outputs + self.scratch:
            expected[rule.name] = rule.dtype[1] if rule.dtype[0] == "fixed" else required.get(rule.dtype[1])
        for i, kernel, name, j, p, pointee in uses:
            want = expected.get(name)
            if pointee is not None and want is not None and pointee != want:
                for_key = f" (the kernel for {key})" if key else ""
                raise self._error(f"launch {i} ({kernel_name(kernel)}){for_key}: args[{j}] is {name!r}, a {want} "
                                  f"tensor, but parameter {j} is {p.spelling} (pointee {p.type} holds {pointee})")
        return required

    def schema(self, returns):
        """The torch schema string: ``(Tensor x, float alpha) -> Tensor`` (``returns`` tensors returned)."""
        out = "Tensor" if returns == 1 else "(" + ", ".join(["Tensor"] * returns) + ")"
        return "(" + ", ".join(f"{kind} {name}" for name, kind in self.args) + ") -> " + out


def names_asked(fn):
    named, takes_all = callable_names(fn)
    if takes_all:
        return ALL_NAMES
    return {name for name, _, _ in named}


class _AllNames:
    def __contains__(self, name):
        return True


ALL_NAMES = _AllNames()
