"""jitbridge/torch/compiled.py — the Python runner: a phase of a jitbridge.torch op compiled into one Python function:
the checks, the allocations and the launches written out as straight-line code over local variables (no name
dictionary, no loops over getters)."""

import itertools
import linecache
import re

from .._opdecl import DTYPE_NAMES
from .._opphase import Value

_counter = itertools.count()


class _Source:
    """The text of a generated function and the objects it refers to by name."""

    def __init__(self):
        self.lines, self.namespace, self._ids = [], {}, {}

    def bind(self, obj):
        """The identifier under which the function sees ``obj``."""
        key = id(obj)
        if key not in self._ids:
            name = f"_o{len(self._ids)}"
            self._ids[key] = name
            self.namespace[name] = obj
        return self._ids[key]

    def line(self, depth, text):
        self.lines.append("    " * depth + text)


def compile_phase(phase, contiguous, torch, *, fake, trusted=False):
    """The function running ``phase`` on torch tensors, taking the phase's arguments in call order.

    Real (``fake=False``): checks that the tensors are CUDA tensors on one device, their dtypes and ``check``
    (ValueError / TypeError naming the argument, before anything is allocated or launched); makes tensor arguments
    contiguous when ``contiguous``; allocates outputs and scratch with torch.empty/empty_like (torch's caching
    allocator, on the inputs' device and torch's current stream); launches each kernel (on torch's current stream,
    which jitbridge reads from the tensors; a grid with a zero dimension launches nothing); returns the output or a
    tuple of them. Fake: the same checks for fake and meta tensors, then only the outputs are allocated.
    ``trusted``: the device and dtype checks are left out, for a backward called by autograd's engine with the
    tensors its forward checked and saved and incoming gradients the engine has already matched to the forward's
    outputs (dtype, device, shape); contiguity is still made sure of."""
    op, names_in = phase.op, phase.arg_names
    dtypes = {n: getattr(torch, n) for n in DTYPE_NAMES if hasattr(torch, n)}
    dtype_names = {d: n for n, d in dtypes.items()}
    src = _Source()
    local_of = {n: f"v{i}" for i, n in enumerate(names_in)}

    def local(name):
        return local_of[name]

    tensor_args, dispatch = phase.tensor_args, phase.dispatch
    first = tensor_args[0]
    Tensor = src.bind(torch.Tensor)

    def device_error(n, t):
        if not isinstance(t, torch.Tensor):
            return TypeError(f"{op}: {n} must be a tensor, got {type(t).__name__}")
        return ValueError(f"{op}: {n} is a {t.device.type} tensor; this op's kernels run on CUDA tensors")

    def mixed_devices_error(n, t, reference):
        return ValueError(f"{op}: {n} is on {t.device} but {first} is on {reference.device}; all tensors must be on "
                          f"one device")

    fname = re.sub(r"\W", "_", f"{op}_{phase.title}{'_fake' if fake else ''}")
    if not fname.isidentifier():
        fname = "_" + fname
    src.line(0, f"def {fname}({', '.join(local(n) for n in names_in)}):")
    bad, mixed = src.bind(device_error), src.bind(mixed_devices_error)
    # ---- devices: CUDA tensors on one device (fake: fake/meta tensors claiming CUDA or meta, on one device)
    if trusted:
        pass
    elif fake:
        allowed_types = src.bind(("cuda", "meta"))
        for n in tensor_args:
            v = local(n)
            src.line(1, f"if not isinstance({v}, {Tensor}) or {v}.device.type not in {allowed_types}: "
                        f"raise {bad}({n!r}, {v})")
            if n != first:
                src.line(1, f"if {v}.device != {local(first)}.device: raise {mixed}({n!r}, {v}, {local(first)})")
    else:
        for n in tensor_args:
            v = local(n)
            src.line(1, f"if not isinstance({v}, {Tensor}) or not {v}.is_cuda: raise {bad}({n!r}, {v})")
        if len(tensor_args) > 1:
            src.line(1, f"_device = {local(first)}.get_device()")
            for n in tensor_args[1:]:
                v = local(n)
                src.line(1, f"if {v}.get_device() != _device: raise {mixed}({n!r}, {v}, {local(first)})")
    # ---- dtypes: the dispatch tensor's dtype picks the kernels; the others must follow the declared rules
    src.line(1, f"key = {src.bind(dtype_names)}.get({local(dispatch)}.dtype)")
    if phase.allowed is not None and not trusted:
        allowed = phase.allowed

        def refused(t):
            key = dtype_names.get(t.dtype)
            return TypeError(f"{op}: {dispatch} has dtype {key or t.dtype}; the kernels are declared for "
                             f"{', '.join(allowed)}")

        src.line(1, f"if key not in {src.bind(frozenset(allowed))}: raise {src.bind(refused)}({local(dispatch)})")

    def wrong_dtype(n, t, want, key):
        return TypeError(f"{op}: {n} has dtype {dtype_names.get(t.dtype, t.dtype)}, expected {dtype_names[want]} "
                         f"(with {dispatch} of dtype {key})")

    wrong = src.bind(wrong_dtype)
    keys = list(phase.required) if phase.keyed else [None]
    wants = {}   # tensor name -> {key: torch dtype it must have}
    for key in keys:
        for n, d in phase.required[key].items():
            if d is not None and n != dispatch and d in dtypes:
                wants.setdefault(n, {})[key] = dtypes[d]
    for n, per_key in ({} if trusted else wants).items():
        v = local(n)
        if not phase.keyed:
            want = src.bind(per_key[None])
            src.line(1, f"if {v}.dtype != {want}: raise {wrong}({n!r}, {v}, {want}, key)")
        else:
            src.line(1, f"_want = {src.bind(per_key)}.get(key)")
            src.line(1, f"if _want is not None and {v}.dtype != _want: raise {wrong}({n!r}, {v}, _want, key)")
    # ---- the declared check, on the arguments as given
    if phase.check_getter is not None:
        def check_failed(e):
            return ValueError(f"{op}: {e}")

        src.line(1, "try:")
        src.line(2, phase.check_getter.source(local, src.bind, names_in))
        src.line(1, f"except ValueError as e: raise {src.bind(check_failed)}(e) from e")
    dense = contiguous and not fake
    if dense:
        for n in tensor_args:
            v = local(n)
            src.line(1, f"if not {v}.is_contiguous(): {v} = {v}.contiguous()")
    # ---- outputs (and scratch) from torch's caching allocator
    defined = list(names_in)
    rules = phase.outputs if fake else phase.outputs + phase.scratch
    for rule in rules:
        local_of[rule.name] = f"v{len(local_of)}"
        src.line(1, f"{local(rule.name)} = {_allocation(rule, torch, dtypes, dense, src, local, defined)}")
        defined.append(rule.name)
    if not fake:
        for plan in phase.launches:
            _launch(plan, src, local, defined)
    results = [local(r.name) for r in phase.outputs]
    src.line(1, f"return {results[0]}" if len(results) == 1 else f"return ({', '.join(results)},)")
    text = "\n".join(src.lines) + "\n"
    filename = f"<jitbridge.torch {fname} #{next(_counter)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)  # tracebacks show the line
    exec(compile(text, filename, "exec"), src.namespace)
    fn = src.namespace[fname]
    fn.__qualname__ = fname
    fn.jitbridge_source = text
    return fn


def _allocation(rule, torch, dtypes, inputs_dense, src, local, defined):
    """The expression allocating one Output rule: torch.empty_like for like= rules, else torch.empty on the device of
    the phase's first tensor. ``inputs_dense``: the tensors rules copy are already contiguous, so empty_like's default
    (preserve the layout) is dense too, without the memory_format argument's cost."""
    kind, source = rule.dtype
    fixed = src.bind(dtypes[source]) if kind == "fixed" else None
    dense = src.bind(torch.contiguous_format)
    if rule.like is not None:
        empty_like, like = src.bind(torch.empty_like), local(rule.like)
        if kind == "arg" and source == rule.like:
            return f"{empty_like}({like})" if inputs_dense else f"{empty_like}({like}, memory_format={dense})"
        dtype = fixed if fixed is not None else f"{local(source)}.dtype"
        return f"{empty_like}({like}, dtype={dtype}, memory_format={dense})"
    shape = rule.shape.source(local, src.bind, defined)
    dtype = fixed if fixed is not None else f"{local(source)}.dtype"
    return f"{src.bind(torch.empty)}({shape}, dtype={dtype}, device={local(rule.device_of)}.device)"


def _config(value, src, local, defined):
    return value.source(local, src.bind, defined) if isinstance(value, Value) else src.bind(value)


def _launch(plan, src, local, defined):
    """The lines of one launch: its grid (skipped when a dimension is zero), block, arguments and shared memory."""
    depth = 1
    if isinstance(plan.grid, Value):
        src.line(1, f"_grid = {plan.grid.source(local, src.bind, defined)}")
        src.line(1, "if _grid != 0 and not (isinstance(_grid, (tuple, list)) and 0 in _grid):")
        grid, depth = "_grid", 2
    else:
        g = plan.grid
        if g == 0 or (isinstance(g, (tuple, list)) and 0 in g):
            return
        grid = src.bind(g)
    block = _config(plan.block, src, local, defined)
    kernel = src.bind(plan.single) if plan.single is not None else f"{src.bind(plan.kernels)}[key]"
    args = ", ".join(g.source(local, src.bind, defined) for g in plan.getters)
    args = f"({args},)" if plan.getters else "()"
    shared = plan.shared_mem
    if isinstance(shared, Value):
        src.line(depth, f"_shared = {shared.source(local, src.bind, defined)}")
        src.line(depth, f"if _shared: {kernel}({grid}, {block}, {args}, shared_mem=_shared)")
        src.line(depth, f"else: {kernel}({grid}, {block}, {args})")
    elif shared:
        src.line(depth, f"{kernel}({grid}, {block}, {args}, shared_mem={src.bind(shared)})")
    else:
        src.line(depth, f"{kernel}({grid}, {block}, {args})")
