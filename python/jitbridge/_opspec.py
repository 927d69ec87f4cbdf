"""_opspec.py — what jitbridge.torch ops are declared from (Launch, Output, numel, size) and every check made on a
declaration before torch is imported: names, kernel signatures, dtypes and const-ness, phase by phase."""

import inspect
import numbers
import operator

__all__ = ["OpDeclarationError", "Launch", "Output", "numel", "size", "OpSpec", "DTYPE_NAMES"]

#: The dtype names that kernel dicts and Output(dtype=...) take (torch dtypes are converted by name).
DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "uint16", "int32", "uint32",
               "int64", "uint64", "bool")
FLOATING = frozenset({"float32", "float64", "float16", "bfloat16"})
# Pointee types as jitbridge's signatures spell them (after typedefs) -> the dtype they hold. 'void' and anything
# not listed take any dtype as far as these checks go (the launch itself still checks).
C_TYPE_DTYPES = {
    "float": "float32", "double": "float64", "__half": "float16", "__nv_bfloat16": "bfloat16",
    "signed char": "int8", "unsigned char": "uint8", "short": "int16", "unsigned short": "uint16",
    "int": "int32", "unsigned int": "uint32", "long": "int64", "long long": "int64",
    "unsigned long": "uint64", "unsigned long long": "uint64", "bool": "bool",
}
SCALAR_KINDS = ("float", "int", "bool")
_TENSOR_PARAM_PREFIX = "jitbridge::Tensor<"


class OpDeclarationError(ValueError):
    """A declaration that cannot work, found before anything is registered or launched: an unknown name, an
    argument that does not fit its kernel parameter, a dtype that does not match a pointee type, an output written
    through a const pointer, a declared gradient no backward launch writes. The message names the op, the launch,
    the kernel and the parameter."""


def dtype_name(dtype):
    """The name ('float32') of a dtype given by name or as a torch dtype (read by name: torch is not imported).
    Raises OpDeclarationError for anything else."""
    name = dtype if isinstance(dtype, str) else str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name not in DTYPE_NAMES:
        raise OpDeclarationError(f"{dtype!r} is not a dtype jitbridge.torch knows; use one of {', '.join(DTYPE_NAMES)}")
    return name


def _is_dtype(value):
    return (isinstance(value, str) and value in DTYPE_NAMES) or type(value).__name__ == "dtype"


class _Query:
    """numel('x') or size('x', dim): a launch argument or grid rule read from one named tensor."""

    __slots__ = ("name", "dim")

    def __init__(self, name, dim=None):
        if not isinstance(name, str):
            raise OpDeclarationError(f"numel()/size() take a tensor name, got {name!r}")
        self.name, self.dim = name, dim

    @property
    def _jitbridge_names(self):
        return (self.name,)

    def __call__(self, **tensors):
        t = tensors[self.name]
        return t.numel() if self.dim is None else t.shape[self.dim]

    def _env_getter(self):
        name, dim = self.name, self.dim
        if dim is None:
            return lambda env: env[name].numel()
        return lambda env: env[name].shape[dim]

    def __repr__(self):
        return f"numel({self.name!r})" if self.dim is None else f"size({self.name!r}, {self.dim})"


def numel(name):
    """A launch argument (or grid rule) giving the element count of the tensor called ``name``."""
    return _Query(name)


def size(name, dim):
    """A launch argument (or grid rule) giving ``tensor.shape[dim]`` of the tensor called ``name``."""
    if not isinstance(dim, int):
        raise OpDeclarationError(f"size({name!r}, {dim!r}): dim must be an int")
    return _Query(name, dim)


def _check_dims(what, value):
    if callable(value):
        return
    dims = value if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise OpDeclarationError(f"Launch: {what}= takes an int, a tuple of 1 to 3 ints, or a callable, got {value!r}")


class Launch:
    """One kernel launch of an op.

    kernel      a RawKernel, or a dict {dtype: RawKernel} (dtype names or torch dtypes) from which the kernel is
                picked by the dtype of the op's first tensor input.
    args        one entry per kernel parameter: a str names a tensor (an input, an output, a saved tensor,
                grad_<output>, grad_<input>, a scratch tensor) or a scalar input; an int/float is a constant; a
                callable gets the named tensors as keyword arguments (those it names, or all with **kwargs) and
                returns a scalar (see numel(), size()).
    grid, block an int, a tuple of up to 3 ints, or such a callable. A grid with a zero dimension skips the launch.
    shared_mem  dynamic shared memory in bytes: an int or such a callable.
    """

    def __init__(self, kernel, *, args, grid, block, shared_mem=0):
        if isinstance(kernel, dict):
            if not kernel:
                raise OpDeclarationError("Launch: the kernel dict is empty")
            self.kernels = {dtype_name(k): v for k, v in kernel.items()}
        else:
            self.kernels = {None: kernel}
        for k in self.kernels.values():
            if not callable(k):
                raise OpDeclarationError(f"Launch: {k!r} is not a kernel (a RawKernel or RawModule.get_function())")
        if not isinstance(args, (tuple, list)):
            raise OpDeclarationError(f"Launch: args= takes a tuple with one entry per kernel parameter, got {args!r}")
        _check_dims("grid", grid)
        _check_dims("block", block)
        if not callable(shared_mem) and (not isinstance(shared_mem, int) or shared_mem < 0):
            raise OpDeclarationError(f"Launch: shared_mem= takes an int >= 0 or a callable, got {shared_mem!r}")
        self.args, self.grid, self.block, self.shared_mem = tuple(args), grid, block, shared_mem

    @property
    def keyed(self):
        return None not in self.kernels

    def __repr__(self):
        return f"Launch({_kernels_label(self)}, args={self.args!r}, grid={self.grid!r}, block={self.block!r})"


class Output:
    """How to allocate an output, a gradient or a scratch tensor (uses shape arithmetic only, so it also works on
    fake tensors).

    ``Output(like="x")``: x's shape and dtype. ``Output(shape=fn, dtype=...)``: shape from ``fn(**tensors)`` (the
    names it asks for) or a tuple of ints; dtype a dtype name, a torch dtype, or the name of a tensor whose dtype to
    copy; by default the dtype of the op's first tensor input. ``like=`` with ``dtype=`` copies the shape only.
    """

    __slots__ = ("like", "shape", "dtype")

    def __init__(self, like=None, *, shape=None, dtype=None):
        if (like is None) == (shape is None):
            raise OpDeclarationError("Output: give exactly one of like= (a tensor name) and shape= (a callable or a "
                                     "tuple of ints)")
        if like is not None and not isinstance(like, str):
            raise OpDeclarationError(f"Output: like= takes a tensor name, got {like!r}")
        if shape is not None and not callable(shape):
            if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise OpDeclarationError(f"Output: shape= takes a callable or a tuple of ints, got {shape!r}")
            shape = tuple(shape)
        if dtype is not None:
            if _is_dtype(dtype):
                dtype = ("fixed", dtype_name(dtype))
            elif isinstance(dtype, str):
                dtype = ("tensor", dtype)
            else:
                raise OpDeclarationError(f"Output: dtype= takes a dtype or a tensor name, got {dtype!r}")
        self.like, self.shape, self.dtype = like, shape, dtype

    def __repr__(self):
        dtype = "" if self.dtype is None else f", dtype={self.dtype[1]!r}"
        return f"Output(like={self.like!r}{dtype})" if self.like else f"Output(shape={self.shape!r}{dtype})"


def _callable_names(fn):
    """(names fn takes as keywords, whether it takes **kwargs). numel()/size() say theirs. Each name is a
    (name, required, positional) triple; positional: it may be passed by position, in this order."""
    names = getattr(fn, "_jitbridge_names", None)
    if names is not None:
        return tuple((n, True, False) for n in names), False
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return (), True
    named, takes_all = [], False
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            takes_all = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            named.append((p.name, p.default is p.empty, p.kind is p.POSITIONAL_OR_KEYWORD))
    return tuple(named), takes_all


def _kernel_name(kernel):
    return getattr(kernel, "name", None) or type(kernel).__name__


def _kernels_label(launch):
    if not launch.keyed:
        return _kernel_name(launch.kernels[None])
    return "{" + ", ".join(f"{k}: {_kernel_name(v)}" for k, v in launch.kernels.items()) + "}"


def _tensor_param(p):
    """(takes a tensor, the pointee's dtype or None, pointee is const) for one signature Param."""
    if p.kind == "pointer":
        return True, C_TYPE_DTYPES.get(p.type), bool(p.is_const)
    if p.type.startswith(_TENSOR_PARAM_PREFIX):  # jitbridge::Tensor<float const, 2>
        elem = p.type[len(_TENSOR_PARAM_PREFIX):].rsplit(",", 1)[0].split()
        const = "const" in elem
        return True, C_TYPE_DTYPES.get(" ".join(w for w in elem if w != "const")), const
    return False, None, False


class _Rule:
    """One Output rule of a phase, resolved: the tensor it copies the shape of (``like``) or else a shape getter over
    the phase's names (``shape``), where its dtype comes from (``('arg', name)``: the dtype of that tensor argument;
    ``('fixed', dtype name)``), and the tensor argument whose device it goes on (``device_of``)."""

    __slots__ = ("name", "like", "shape", "dtype", "device_of")

    def __init__(self, name, like, shape, dtype, device_of):
        self.name, self.like, self.shape, self.dtype, self.device_of = name, like, shape, dtype, device_of


class _LaunchPlan:
    """A Launch bound to a phase's names: kernel per dtype key, getters for each argument and the configuration."""

    __slots__ = ("kernels", "single", "getters", "grid", "block", "shared_mem")

    def __init__(self, launch, getters, grid, block, shared_mem):
        self.kernels = launch.kernels
        self.single = launch.kernels.get(None)
        self.getters, self.grid, self.block, self.shared_mem = getters, grid, block, shared_mem

    def run(self, env, key):
        """Launches with the tensors and scalars in ``env`` (on the arrays' framework's current stream), choosing
        the kernel for dtype ``key``. A grid with a zero dimension launches nothing."""
        grid = self.grid(env) if callable(self.grid) else self.grid
        if grid == 0 or (isinstance(grid, (tuple, list)) and 0 in grid):
            return
        block = self.block(env) if callable(self.block) else self.block
        kernel = self.single if self.single is not None else self.kernels[key]
        args = tuple([g(env) for g in self.getters])
        shared = self.shared_mem(env) if callable(self.shared_mem) else self.shared_mem
        if shared:
            kernel(grid, block, args, shared_mem=shared)
        else:
            kernel(grid, block, args)


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
        self.outputs = [self._rule(name, rule, f"{self._out_what} {name!r}") for name, rule in outputs]
        self.launches, used = [], set()
        for i, launch in enumerate(launches, 1):
            self.launches.append(self._plan(i, launch, used))
        self.scratch = [self._rule(n, r, f"scratch {n!r}") for n, r in scratch.items() if n in used]
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
            reason = f"{name!r} cannot be used here; this sees only {', '.join(sorted(allowed))}"
        elif reason is None:
            reason = f"unknown name {name!r}; the {self.title} knows {', '.join(sorted(allowed))}"
        raise self._error(f"{where}: {reason}")

    def _getter(self, fn, where, allowed):
        """An env -> value function calling fn with the names it asks for (checked against ``allowed``), by
        position where the signature allows it (a keyword call costs a dict per call)."""
        named, takes_all = _callable_names(fn)
        names, positional = [], True
        for name, required, by_position in named:
            if name in allowed:
                names.append(name)
                positional = positional and by_position
            else:
                if required:
                    self._resolve(name, f"{where} ({fn!r}) asks for {name!r}", allowed)
                positional = False  # a skipped parameter: later ones must go by keyword
        if hasattr(fn, "_env_getter"):
            return fn._env_getter()
        if takes_all:
            return lambda env: fn(**env)
        if positional and len(names) == 1:
            only = names[0]
            return lambda env: fn(env[only])
        if positional and len(names) == 2:
            first, second = names
            return lambda env: fn(env[first], env[second])
        if positional:
            return lambda env: fn(*[env[n] for n in names])
        return lambda env: fn(**{n: env[n] for n in names})

    def _rule(self, name, rule, where):
        if not isinstance(rule, Output):
            raise self._error(f"{where}: expected an Output rule, got {rule!r}")
        args = set(self.arg_names)
        shape = None        # like= rules copy the shape of their tensor
        if rule.like is not None:
            self._resolve(rule.like, f"{where}: like={rule.like!r}", set(self.tensor_args))
        elif callable(rule.shape):
            shape = self._getter(rule.shape, f"{where}: shape=", args)
        else:
            fixed = rule.shape
            shape = lambda env: fixed  # noqa: E731
        if rule.dtype is None:
            dtype = ("arg", rule.like or self.dispatch)
        elif rule.dtype[0] == "tensor":
            self._resolve(rule.dtype[1], f"{where}: dtype={rule.dtype[1]!r}", set(self.tensor_args))
            dtype = ("arg", rule.dtype[1])
        else:
            dtype = rule.dtype
        return _Rule(name, rule.like, shape, dtype, self.dispatch)

    def _plan(self, index, launch, used):
        if not isinstance(launch, Launch):
            raise self._error(f"launch {index}: expected a Launch, got {launch!r}")
        label = f"{self.title} launch {index} ({_kernels_label(launch)})"
        getters = []
        for j, arg in enumerate(launch.args):
            where = f"{label}: args[{j}]"
            if isinstance(arg, str):
                self._resolve(arg, where, self._known)
                used.add(arg)
                getters.append(operator.itemgetter(arg))
            elif isinstance(arg, numbers.Number):
                getters.append(lambda env, value=arg: value)
            elif callable(arg):
                getters.append(self._getter(arg, where, self._known))
                self._note_used(arg, used)
            else:
                raise self._error(f"{where} is {arg!r}: use a tensor or scalar name, a number, or a callable")
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
        asked = _names_asked(fn)
        used.update(n for n in self._known if n in asked)

    def _arg_description(self, arg):
        if isinstance(arg, str):
            return f"the {'tensor' if arg in self._tensors else 'scalar input'} {arg!r}"
        return f"the constant {arg!r}" if not callable(arg) else f"the callable {arg!r} (it gives a scalar)"

    def _check_signature(self, launch, key, kernel, label):
        sig = getattr(kernel, "signature", None)
        if sig is None:  # loaded from a binary: no types to check against
            return
        where = label if key is None else f"{label}, the {key} kernel {_kernel_name(kernel)}"
        params = list(sig.params)
        if len(params) != len(launch.args):
            raise self._error(f"{where}: the kernel takes {len(params)} parameters {sig}, but args= has "
                              f"{len(launch.args)} entries {launch.args!r}")
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
                where = f"{self.title} launch {i} ({_kernel_name(kernel)}): args[{j}] {name!r}"
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
                raise self._error(f"launch {i} ({_kernel_name(kernel)}){for_key}: args[{j}] is {name!r}, a {want} "
                                  f"tensor, but parameter {j} is {p.spelling} (pointee {p.type} holds {pointee})")
        return required

    def schema(self, returns):
        """The torch schema string: ``(Tensor x, float alpha) -> Tensor`` (``returns`` tensors returned)."""
        out = "Tensor" if returns == 1 else "(" + ", ".join(["Tensor"] * returns) + ")"
        return "(" + ", ".join(f"{kind} {name}" for name, kind in self.args) + ") -> " + out


def _names_asked(fn):
    named, takes_all = _callable_names(fn)
    if takes_all:
        return _ALL
    return {name for name, _, _ in named}


def _referenced(launches, rules):
    """Every name that ``launches`` and Output ``rules`` refer to; _ALL when a callable takes **kwargs."""
    rules = [r for r in rules if isinstance(r, Output)]
    names = {r.like for r in rules} | {r.dtype[1] for r in rules if r.dtype}
    items = [a for launch in launches for a in launch.args + (launch.grid, launch.block, launch.shared_mem)]
    for item in items + [r.shape for r in rules]:
        if isinstance(item, str):
            names.add(item)
        elif callable(item):
            asked = _names_asked(item)
            if asked is _ALL:
                return _ALL
            names |= asked
    return names


class _AllNames:
    def __contains__(self, name):
        return True


_ALL = _AllNames()


def _identifier(name, what, op):
    if not isinstance(name, str) or not name.isidentifier():
        raise OpDeclarationError(f"{op}: {what} {name!r} is not a valid name")
    if name.startswith("grad_"):
        raise OpDeclarationError(f"{op}: {what} {name!r}: names starting with grad_ are reserved for gradients")
    return name


class OpSpec:
    """A checked op declaration (see jitbridge.torch.custom_op): its inputs (name, kind) in call order, outputs,
    save list, the forward Phase and the backward Phase (None without backward=). Raises OpDeclarationError."""

    def __init__(self, name, *, inputs, outputs, forward, save=(), backward=(), grads=None, scratch=None,
                 check=None, contiguous=True, qualified=True):
        if qualified and (not isinstance(name, str) or name.count("::") != 1
                          or not all(part.isidentifier() for part in name.split("::"))):
            raise OpDeclarationError(f"op name {name!r}: expected 'namespace::name', e.g. 'mylib::fused_bias_gelu'")
        self.name, self.contiguous = name, bool(contiguous)
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
        if check is not None and not callable(check):
            raise OpDeclarationError(f"{name}: check= takes a callable, got {check!r}")
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
                raise OpDeclarationError(f"{name}: save= names {n!r}, which is {kind}")
        for g in grads or ():
            if g not in self.tensor_inputs:
                raise OpDeclarationError(f"{name}: grads= has an entry for {g!r}, which is not a tensor input")
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
                raise OpDeclarationError(f"{self.name}: input {entry!r} is not a str")
            n, _, kind = entry.partition(":")
            kind = kind.strip() or "Tensor"
            if kind not in ("Tensor",) + SCALAR_KINDS:
                raise OpDeclarationError(f"{self.name}: input {entry!r}: the kind must be Tensor, float, int or bool")
            parsed.append((_identifier(n.strip(), "input", self.name), kind))
        return parsed

    def _check_unique(self, names):
        seen = set()
        for n in names:
            if n in seen:
                raise OpDeclarationError(f"{self.name}: the name {n!r} is declared twice (inputs, outputs, scratch)")
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
            raise OpDeclarationError(f"{op}: {title}= takes a Launch or a sequence of Launches, got {launch!r}")
    return launches
