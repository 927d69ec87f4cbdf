"""jitbridge.torch — PyTorch ops from jitbridge kernels: declare the launches, get a differentiable op.

    import jitbridge, jitbridge.torch as jt
    from jitbridge.torch import Launch, Output, numel, size

    m = jitbridge.RawModule(code=SOURCE, name_expressions=["fwd<float>", "fwd<double>", ...])
    per_dtype = lambda k: {"float32": m.get_function(f"{k}<float>"), "float64": m.get_function(f"{k}<double>")}
    fused = jt.custom_op(
        "mylib::fused_bias_gelu",
        inputs=("x", "bias"),
        outputs={"y": Output(like="x")},
        forward=Launch(per_dtype("fwd"), args=("x", "bias", "y", numel("x"), size("x", -1)),
                       grid=lambda x: (x.numel() + 1023) // 1024, block=256),
        save=("x", "bias"),
        backward=Launch(per_dtype("bwd"), args=("x", "bias", "grad_y", "grad_x", ...), grid=..., block=...),
        grads={"x": Output(like="x")},
    )
    y = fused(x, bias)      # a torch.library custom op: eager, torch.compile(fullgraph=True), CUDA graphs

``custom_op`` registers a torch.library op (a functional schema, the runner for CUDA, a fake implementation from
the Output rules and, with ``backward=``, a second op ``<name>_backward`` plus ``register_autograd``);
``function`` gives an eager-only ``torch.autograd.Function`` (no registered op name; about 3 us more per call
than custom_op). Both check the declaration first and raise ``OpDeclarationError`` before torch is even imported: importing this module never imports torch; registering an op
without PyTorch installed raises ImportError. At call time both raise before any launch: ValueError for a tensor
not on CUDA, tensors on different devices or a failed ``check``; TypeError for a dtype the kernels were not declared
for. Kernels run on torch's current stream; outputs come from torch's caching allocator. See docs/TORCH.md.
"""

from ._opspec import DTYPE_NAMES, Launch, OpDeclarationError, OpSpec, Output, numel, size

__all__ = ["custom_op", "function", "Launch", "Output", "numel", "size", "OpDeclarationError"]


def custom_op(name, *, inputs, outputs, forward, save=(), backward=(), grads=None, scratch=None, check=None,
              contiguous=True):
    """Declares and registers a PyTorch custom op ``name`` ("namespace::name") run by jitbridge kernels; returns
    the op (the ``torch._ops.OpOverload`` ``torch.ops.namespace.name.default``).

    inputs      names in call order: ``"x"`` is a Tensor, ``"alpha: float"`` / ``"n: int"`` / ``"flag: bool"`` a
                scalar (scalars are also available by name to args and rules).
    outputs     dict name -> Output, in return order: one output returns a Tensor, several a tuple.
    forward     a Launch or a sequence of Launches, run in order. A Launch whose kernel is a dict picks the kernel
                by the dtype of the op's first tensor input.
    save        input and output names kept for the backward.
    backward    Launch(es) computing ``grad_<input>`` from saved tensors, ``grad_<output>`` (incoming gradients;
                zeros where autograd has none) and scalar inputs; registered as the op ``<name>_backward``.
    grads       dict input name -> Output rule of its gradient; inputs without an entry get None.
    scratch     dict name -> Output of temporaries the launches may use (allocated per call, per phase).
    check       callable(**inputs) raising ValueError for inputs that do not fit (also runs on fake tensors).
    contiguous  True: tensor inputs (and incoming gradients) are made contiguous first, so kernels see dense
                row-major memory; False: they arrive as given (use jitbridge::Tensor parameters for strides).

    Raises OpDeclarationError (a ValueError) for a declaration that cannot work, ImportError without PyTorch.
    """
    spec = OpSpec(name, inputs=inputs, outputs=outputs, forward=forward, save=save, backward=backward, grads=grads,
                  scratch=scratch, check=check, contiguous=contiguous)
    return _register_custom_op(spec)


def function(*, inputs, outputs, forward, save=(), backward=(), grads=None, scratch=None, check=None,
             contiguous=True, name=None):
    """The same declaration as custom_op(), as a plain callable built on ``torch.autograd.Function``: no op
    name registered with torch.library (re-declaring is fine), eager mode only (no torch.compile tracing,
    opcheck, export). ``name`` labels errors.
    Raises OpDeclarationError (a ValueError) for a declaration that cannot work, ImportError without PyTorch."""
    label = name or "jitbridge.torch.function"
    spec = OpSpec(label, inputs=inputs, outputs=outputs, forward=forward, save=save, backward=backward, grads=grads,
                  scratch=scratch, check=check, contiguous=contiguous, qualified=False)
    return _make_function(spec)


def _import_torch(what):
    try:
        import torch
    except ImportError as e:
        raise ImportError(f"jitbridge.torch.{what} needs PyTorch ({e}); the declaration itself was checked "
                          f"without it") from e
    return torch


def _phase_runner(phase, contiguous, torch, *, fake):
    """The function that runs ``phase`` on torch tensors (``fake``: only allocates the outputs, for fake and meta
    tensors). It checks devices, dtypes and ``check`` before anything else, allocates outputs and scratch through
    torch's caching allocator on the inputs' device (stream-ordered on torch's current stream) and launches each
    kernel on torch's current stream, which jitbridge reads from the tensors."""
    op, arg_names, tensor_args, dispatch = phase.op, phase.arg_names, phase.tensor_args, phase.dispatch
    dtypes = {n: getattr(torch, n) for n in DTYPE_NAMES if hasattr(torch, n)}
    names = {d: n for n, d in dtypes.items()}
    allowed, keyed = phase.allowed, phase.keyed
    required = {key: tuple((n, dtypes[d]) for n, d in table.items() if d is not None and n != dispatch and d in dtypes)
                for key, table in phase.required.items()}
    check = phase.check_getter
    outputs = [(rule.name, _allocator(rule, torch, dtypes, contiguous and not fake)) for rule in phase.outputs]
    scratch = [(rule.name, _allocator(rule, torch, dtypes, contiguous and not fake)) for rule in phase.scratch]
    launches = phase.launches
    Tensor = torch.Tensor
    single = len(outputs) == 1

    def device_error(n, t):
        if not isinstance(t, Tensor):
            return TypeError(f"{op}: {n} must be a tensor, got {type(t).__name__}")
        return ValueError(f"{op}: {n} is a {t.device.type} tensor; this op's kernels run on CUDA tensors")

    def mixed_devices_error(n, t, env):
        return ValueError(f"{op}: {n} is on {t.device} but {tensor_args[0]} is on {env[tensor_args[0]].device}; "
                          f"all tensors must be on one device")

    first_tensor, other_tensors = tensor_args[0], tensor_args[1:]

    def check_devices(env):     # the real path: CUDA tensors, compared by device index
        t = env[first_tensor]
        if not isinstance(t, Tensor) or not t.is_cuda:
            raise device_error(first_tensor, t)
        if other_tensors:
            index = t.get_device()
            for n in other_tensors:
                t = env[n]
                if not isinstance(t, Tensor) or not t.is_cuda:
                    raise device_error(n, t)
                if t.get_device() != index:
                    raise mixed_devices_error(n, t, env)

    def check_fake_devices(env):    # fake tensors (torch.compile, opcheck) and meta tensors
        device = None
        for n in tensor_args:
            t = env[n]
            if not isinstance(t, Tensor) or t.device.type not in ("cuda", "meta"):
                raise device_error(n, t)
            if device is None:
                device = t.device
            elif t.device != device:
                raise mixed_devices_error(n, t, env)

    def validate(env):
        (check_fake_devices if fake else check_devices)(env)
        first = env[dispatch]
        key = names.get(first.dtype)
        if allowed is not None and key not in allowed:
            raise TypeError(f"{op}: {dispatch} has dtype {key or first.dtype}; the kernels are declared for "
                            f"{', '.join(allowed)}")
        for n, want in required[key if keyed else None]:
            if env[n].dtype != want:
                raise TypeError(f"{op}: {n} has dtype {names.get(env[n].dtype, env[n].dtype)}, expected "
                                f"{names[want]} (with {dispatch} of dtype {key})")
        if check is not None:
            try:
                check(env)
            except ValueError as e:
                raise ValueError(f"{op}: {e}") from e
        return key

    def run(*args):
        env = dict(zip(arg_names, args))
        key = validate(env)
        if contiguous:
            for n in tensor_args:
                t = env[n]
                if not t.is_contiguous():
                    env[n] = t.contiguous()
        results = []
        for name, allocate in outputs:
            t = env[name] = allocate(env)
            results.append(t)
        for name, allocate in scratch:
            env[name] = allocate(env)
        for launch in launches:
            launch.run(env, key)
        return results[0] if single else tuple(results)

    def run_fake(*args):
        env = dict(zip(arg_names, args))
        validate(env)
        results = [allocate(env) for _, allocate in outputs]
        return results[0] if single else tuple(results)

    chosen = run_fake if fake else run
    chosen.__name__ = chosen.__qualname__ = f"{op.replace('::', '_')}_{phase.title}{'_fake' if fake else ''}"
    return chosen


def _allocator(rule, torch, dtypes, inputs_dense):
    """env -> a new dense tensor for one Output rule (torch.empty_like for like= rules, else torch.empty on the
    device of the phase's first tensor). ``inputs_dense``: the tensors rules copy are already contiguous, so
    empty_like's default (preserve the layout) is dense too, without the memory_format argument's cost."""
    kind, source = rule.dtype
    fixed = dtypes[source] if kind == "fixed" else None
    dense = torch.contiguous_format
    if rule.like is not None:
        like = rule.like
        if kind == "arg" and source == like:
            if inputs_dense:
                return lambda env: torch.empty_like(env[like])
            return lambda env: torch.empty_like(env[like], memory_format=dense)
        if fixed is not None:
            return lambda env: torch.empty_like(env[like], dtype=fixed, memory_format=dense)
        return lambda env: torch.empty_like(env[like], dtype=env[source].dtype, memory_format=dense)
    shape, device_of = rule.shape, rule.device_of
    if fixed is not None:
        return lambda env: torch.empty(shape(env), dtype=fixed, device=env[device_of].device)
    return lambda env: torch.empty(shape(env), dtype=env[source].dtype, device=env[device_of].device)


class _AutogradLink:
    """What connects an op's forward to its backward phase, for custom_op and function alike: what to save on ctx,
    how to call the backward (the ``<name>_backward`` op, or the phase directly) and where its gradients go."""

    def __init__(self, spec, torch):
        input_index = {n: i for i, (n, _) in enumerate(spec.inputs)}
        output_index = {n: i for i, (n, _) in enumerate(spec.outputs)}
        self.saved = tuple((False, input_index[n]) if n in input_index else (True, output_index[n]) for n in spec.save)
        self.scalars = tuple(input_index[n] for n, _ in spec.scalar_inputs)
        self.grad_outputs = tuple(output_index[n] for n in spec.grad_outputs)
        self.grad_inputs = tuple(input_index[n] for n in spec.tensor_inputs if n in spec.grads)
        self.n_inputs = len(spec.inputs)
        self.zeros = torch.zeros

    def setup_context(self, ctx, inputs, output):
        """Saves what the backward needs (torch.library's setup_context signature)."""
        outputs = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*[outputs[i] if is_output else inputs[i] for is_output, i in self.saved])
        ctx.jitbridge_scalars = tuple(inputs[i] for i in self.scalars)
        ctx.jitbridge_grad_meta = tuple((outputs[i].shape, outputs[i].dtype, outputs[i].device)
                                        for i in self.grad_outputs)

    def backward(self, ctx, grads, run_backward):
        """One gradient per input (None for scalars and inputs without a grads entry); None incoming gradients
        become zeros."""
        incoming = [grads[i] if grads[i] is not None else self.zeros(shape, dtype=dtype, device=device)
                    for i, (shape, dtype, device) in zip(self.grad_outputs, ctx.jitbridge_grad_meta)]
        result = run_backward(*ctx.saved_tensors, *incoming, *ctx.jitbridge_scalars)
        if not isinstance(result, tuple):
            result = (result,)
        out = [None] * self.n_inputs
        for i, g in zip(self.grad_inputs, result):
            out[i] = g
        return tuple(out)


_LIBRARIES = []  # the torch.library.Library fragments of registered ops: their registrations live as long as they do


def _register_custom_op(spec):
    """Registers ``spec`` with torch.library: the op (schema, the runner as its CUDA and CPU kernel, the fake), and
    with a backward the ``<name>_backward`` op the same way plus register_autograd. Returns the op's OpOverload.

    The runner is registered per dispatch key (``Library.impl``) rather than through ``torch.library.custom_op``,
    whose per-call Python wrapper costs several microseconds; the CPU registration is the same runner, which
    refuses CPU tensors with a ValueError naming the argument. torch.compile, opcheck and CUDA graphs see the same
    thing as for custom_op: a functional schema, a fake implementation and an autograd formula."""
    torch = _import_torch("custom_op")
    namespace, _, short = spec.name.partition("::")
    library = torch.library.Library(namespace, "FRAGMENT")
    _LIBRARIES.append(library)
    ops = getattr(torch.ops, namespace)

    def define(name, phase, returns):
        try:
            library.define(name + phase.schema(returns))
        except RuntimeError as e:
            if "multiple times" not in str(e):
                raise
            raise OpDeclarationError(f"{namespace}::{name}: an op of this name is already registered in this "
                                     f"process (torch.library names are process-wide); choose another name, or use "
                                     f"jitbridge.torch.function for an unregistered op") from e
        real = _phase_runner(phase, spec.contiguous, torch, fake=False)
        for key in ("CUDA", "CPU"):
            library.impl(name, real, key)
        torch.library.register_fake(f"{namespace}::{name}", _phase_runner(phase, spec.contiguous, torch, fake=True),
                                    lib=library)
        return getattr(ops, name).default

    op = define(short, spec.forward, len(spec.outputs))
    if spec.backward is not None:
        backward_op = define(short + "_backward", spec.backward, len(spec.grads))
        link = _AutogradLink(spec, torch)

        def backward(ctx, *grads):
            return link.backward(ctx, grads, backward_op)

        torch.library.register_autograd(spec.name, backward, setup_context=link.setup_context, lib=library)
    return op


def _make_function(spec):
    """A callable running ``spec`` through a torch.autograd.Function subclass (eager only)."""
    torch = _import_torch("function")
    run_forward = _phase_runner(spec.forward, spec.contiguous, torch, fake=False)
    run_backward = _phase_runner(spec.backward, spec.contiguous, torch, fake=False) if spec.backward else None
    link = _AutogradLink(spec, torch) if spec.backward else None
    label = spec.name

    class JitbridgeFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            result = run_forward(*args)
            if link is not None:
                link.setup_context(ctx, args, result)
            return result

        @staticmethod
        def backward(ctx, *grads):
            if link is None:
                raise RuntimeError(f"{label}: declared without backward=, so it has no gradient")
            return link.backward(ctx, grads, run_backward)

    apply = JitbridgeFunction.apply
    input_names = [n for n, _ in spec.inputs]

    def call(*args, **kwargs):
        if kwargs:
            args = _bind(label, input_names, args, kwargs)
        return apply(*args)

    call.__name__ = call.__qualname__ = label.replace(".", "_")
    call.__doc__ = f"{label}({', '.join(input_names)}): a jitbridge.torch.function (torch.autograd.Function)."
    call.autograd_function = JitbridgeFunction
    return call


def _bind(label, names, args, kwargs):
    if len(args) > len(names):
        raise TypeError(f"{label}() takes {len(names)} arguments ({', '.join(names)}), {len(args)} given")
    bound = list(args)
    for n in names[len(args):]:
        if n not in kwargs:
            raise TypeError(f"{label}() missing argument {n!r}")
        bound.append(kwargs.pop(n))
    if kwargs:
        raise TypeError(f"{label}() got unexpected arguments {', '.join(map(repr, kwargs))}")
    return bound
