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

from .._opexpr import Check, NotExpressible, cdiv, maximum, minimum, where
from .._opspec import DTYPE_NAMES, Launch, OpDeclarationError, OpSpec, Output, numel, size  # noqa: F401 (DTYPE_NAMES: for tests)
from . import compiled  # the Python runner (addon and description, the native runner's, load at first use)

__all__ = ["custom_op", "function", "runner", "Launch", "Output", "Check", "numel", "size", "cdiv", "minimum",
           "maximum", "where", "OpDeclarationError", "Runner"]


class Runner:
    """Which runner an op registered by custom_op uses: ``kind`` is "native" (dispatcher kernels and an autograd
    node in C++, torch_native/addon.cpp: no Python per call) or "python" (the compiled Python runner), ``reason``
    why."""

    __slots__ = {"kind": '"native" or "python": the runner the op uses', "reason": "why that runner (a sentence)"}

    def __init__(self, kind, reason):
        """Made by custom_op when it registers an op; read it with runner(op)."""
        self.kind, self.reason = kind, reason

    def __repr__(self):
        return f"<jitbridge.torch runner: {self.kind} ({self.reason})>"


def runner(op):
    """The Runner of an op custom_op registered (its OpOverload, OpOverloadPacket or "namespace::name").
    Raises KeyError for an op this process did not declare."""
    name = op if isinstance(op, str) else getattr(op, "_schema", None) and op._schema.name
    if name is None:
        name = getattr(op, "_qualified_op_name", None)
    registration = _REGISTERED.get(name)
    if registration is None:
        raise KeyError(f"{op!r} is not an op declared with jitbridge.torch.custom_op in this process")
    return registration.runner


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

    Declaring a ``name`` this process already declared replaces the op's kernels, fake and backward (a notebook
    cell edited and run again); every handle to the op, torch.compile graphs included, runs the new ones. The schema
    (inputs, outputs, whether there is a backward, what the backward takes) and which inputs have gradients (the
    keys of ``grads``) must stay the same.

    Raises OpDeclarationError (a ValueError) for a declaration that cannot work, a re-declaration that changes the
    schema or the inputs that have gradients, or a name registered by other code; ImportError without PyTorch.
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


def _phase_runner(phase, contiguous, torch, *, fake, trusted=False):
    """The function that runs ``phase`` on torch tensors (``fake``: only allocates the outputs, for fake and meta
    tensors), compiled from the declaration by compiled.compile_phase: it checks devices, dtypes and ``check``
    before anything else, allocates outputs and scratch through torch's caching allocator on the inputs' device
    (stream-ordered on torch's current stream) and launches each kernel on torch's current stream, which jitbridge
    reads from the tensors. ``trusted``: a backward called only by autograd's engine, whose device and dtype checks
    were made in the forward (see compile_phase)."""
    return compiled.compile_phase(phase, contiguous, torch, fake=fake, trusted=trusted)


class _AutogradLink:
    """What connects an op's forward to its backward phase, for custom_op and function alike: what to save on ctx,
    how to call the backward and where its gradients go. Both kinds of op are a torch.autograd.Function, whose
    incoming gradients torch materializes (an output without a gradient gets zeros), so the backward always sees
    one tensor per differentiable output."""

    def __init__(self, spec):
        input_index = {n: i for i, (n, _) in enumerate(spec.inputs)}
        output_index = {n: i for i, (n, _) in enumerate(spec.outputs)}
        self.saved = tuple((False, input_index[n]) if n in input_index else (True, output_index[n]) for n in spec.save)
        self.scalars = tuple(input_index[n] for n, _ in spec.scalar_inputs)
        self.grad_outputs = tuple(output_index[n] for n in spec.grad_outputs)
        self.grad_inputs = tuple(input_index[n] for n in spec.tensor_inputs if n in spec.grads)
        self.n_inputs = len(spec.inputs)

    def setup_context(self, ctx, inputs, output):
        """Saves what the backward needs."""
        if self.saved:
            outputs = output if isinstance(output, tuple) else (output,)
            ctx.save_for_backward(*[outputs[i] if is_output else inputs[i] for is_output, i in self.saved])
        if self.scalars:
            ctx.jitbridge_scalars = tuple(inputs[i] for i in self.scalars)

    def backward(self, ctx, grads, run_backward):
        """One gradient per input (None for scalars and inputs without a grads entry)."""
        scalars = ctx.jitbridge_scalars if self.scalars else ()
        result = run_backward(*ctx.saved_tensors, *[grads[i] for i in self.grad_outputs], *scalars)
        if not isinstance(result, tuple):
            result = (result,)
        out = [None] * self.n_inputs
        for i, g in zip(self.grad_inputs, result):
            out[i] = g
        return out


def _eager_test(torch, positions):
    """A function telling whether tensors at ``positions`` of a call can skip the dispatcher and go to the compiled
    runner directly: plain CUDA tensors (torch.Tensor or nn.Parameter, no subclass that dispatches on its own),
    no TorchDispatchMode and no functorch transform active. Anything else (fake and functional tensors while
    torch.compile traces, meta tensors, modes such as opcheck's) goes through the registered op, as before."""
    C = torch._C
    modes = C._len_torch_dispatch_stack
    transforms = getattr(C, "_are_functorch_transforms_active", lambda: False)
    plain = (torch.Tensor, torch.nn.Parameter)

    def eager(values):
        if modes() or transforms():
            return False
        for i in positions:
            t = values[i]
            if t is not None and t.__class__ not in plain:
                return False
        return values[positions[0]].is_cuda
    return eager


_LIBRARIES = []  # the torch.library.Library fragments of registered ops: their registrations live as long as they do


class _Registration:
    """The live implementation behind an op jitbridge registered: the dispatcher's kernels for it are trampolines
    calling the attributes here, so re-declaring the op (a notebook cell edited and run again) swaps the kernels
    under the same registered name, and handles to the op taken before (``torch.ops.ns.name``, a model holding
    the OpOverload, a torch.compile graph) run the new ones. ``schemas`` and ``gradients`` are the first
    declaration's, which every re-declaration must keep (_redeclaration_error)."""

    __slots__ = ("schemas", "gradients", "op", "forward", "forward_fake", "backward", "backward_fake", "autograd",
                 "runner")

    def trampolines(self):
        """(forward, forward fake, backward, backward fake, Autograd kernel): what is registered, once."""
        def forward(*args):
            return self.forward(*args)

        def forward_fake(*args):
            return self.forward_fake(*args)

        def backward(*args):
            return self.backward(*args)

        def backward_fake(*args):
            return self.backward_fake(*args)

        def autograd(keyset, *args):
            return self.autograd(keyset, *args)

        return forward, forward_fake, backward, backward_fake, autograd


_REGISTERED = {}  # "namespace::name" -> _Registration, for the ops this process's declarations registered


def _schemas(spec):
    short = spec.name.partition("::")[2]
    forward = short + spec.forward.schema(len(spec.outputs))
    backward = None if spec.backward is None else short + "_backward" + spec.backward.schema(len(spec.grads))
    return forward, backward


def _gradient_inputs(spec):
    """The tensor inputs that have gradients (the keys of grads=), in input order: where an autograd graph puts
    the ``_backward`` op's results."""
    return tuple(n for n in spec.tensor_inputs if n in spec.grads)


def _redeclaration_error(spec, current, schemas, gradients):
    """Why ``spec`` cannot replace the op registered as ``current``, or None.

    An autograd graph recorded before a re-declaration keeps the earlier declaration's wiring (the tensors it saved,
    the incoming gradients and scalars it passes, the inputs it gives the results to) but calls the op's current
    ``_backward`` op. The backward schema names the saved tensors, the incoming gradients and the scalars in order,
    so keeping the schemas keeps those; it counts the results without naming them, so the inputs that have
    gradients are compared here, first (the more precise message when their number changed too)."""
    if schemas[1] is not None and current.schemas[1] is not None and gradients != current.gradients:
        return (f"{spec.name}: this process declared the op with gradients for {', '.join(current.gradients)}; a "
                f"re-declaration replaces its kernels but must keep which inputs have gradients, here "
                f"{', '.join(gradients)} (an autograd graph recorded before would give the new backward's results "
                f"to the inputs it was recorded for): keep the keys of grads=, or choose another name")
    if schemas != current.schemas:
        def shown(pair):
            return pair[0] + ("" if pair[1] is None else f" with backward {pair[1]}")
        return (f"{spec.name}: this process declared the op as {shown(current.schemas)}; a re-declaration replaces "
                f"its kernels but must keep its schema, here {shown(schemas)} (torch.library cannot redefine an "
                f"op): keep the inputs, outputs and backward, or choose another name")
    return None


def _register_custom_op(spec):
    """Registers ``spec`` with torch.library: the op (schema, the runner as its CUDA and CPU kernel, the fake), and
    with a backward the ``<name>_backward`` op the same way plus an Autograd kernel. Returns the op's OpOverload.

    The runner is registered per dispatch key (``Library.impl``) rather than through ``torch.library.custom_op``,
    whose per-call Python wrapper costs several microseconds; the CPU registration is the same runner, which
    refuses CPU tensors with a ValueError naming the argument. The Autograd kernel is what
    ``torch.library.register_autograd`` registers (a torch.autograd.Function applied at the Autograd key), written
    for this op: no pytree walks, and for plain CUDA tensors in eager mode it calls the compiled runners directly
    instead of going back through the dispatcher (``_eager_test``). torch.compile, opcheck and CUDA graphs see the
    same thing as for custom_op: a functional schema, a fake implementation and an autograd formula whose backward
    calls the ``<name>_backward`` op.

    Declaring a name this process already declared replaces the op's kernels, fake and backward (the registered
    kernels are trampolines into a _Registration); the schema (inputs, outputs, whether there is a backward, what
    it takes) and the inputs that have gradients must stay the same, else OpDeclarationError. A fresh name whose
    registration fails part-way is left unregistered (_define_fresh), so declaring it again starts clean."""
    torch = _import_torch("custom_op")
    namespace, _, short = spec.name.partition("::")
    schemas, gradients = _schemas(spec), _gradient_inputs(spec)
    current = _REGISTERED.get(spec.name)
    if current is not None:
        refused = _redeclaration_error(spec, current, schemas, gradients)
        if refused is not None:
            raise OpDeclarationError(refused)
    native = _native_plan(spec, torch, current)
    # Everything the declaration makes, before anything is registered or swapped in: a failure leaves the old op
    # working (and a fresh name unregistered).
    forward = _phase_runner(spec.forward, spec.contiguous, torch, fake=False)
    forward_fake = _phase_runner(spec.forward, spec.contiguous, torch, fake=True)
    backward = backward_fake = trusted = None
    if spec.backward is not None:
        backward = _phase_runner(spec.backward, spec.contiguous, torch, fake=False)
        backward_fake = _phase_runner(spec.backward, spec.contiguous, torch, fake=True)
        trusted = _phase_runner(spec.backward, spec.contiguous, torch, fake=False, trusted=True)
    if current is None:
        current = _Registration()
        current.schemas, current.gradients = schemas, gradients
        current.runner, autograd = _define_fresh(torch, spec, current, native, forward, trusted)
        _REGISTERED[spec.name] = current
    else:
        autograd = None
        if spec.backward is not None:
            backward_op = getattr(getattr(torch.ops, namespace), short + "_backward").default
            autograd = _autograd_kernel(spec, torch, current.op, forward, backward_op, trusted)
        if current.runner.kind == "native":
            if native is None:
                raise OpDeclarationError(f"{spec.name}: this process declared the op with the native runner; a "
                                         f"re-declaration must keep it, but this one needs the Python runner "
                                         f"({_native_reason}): write the rule as an expression, or choose another "
                                         f"name")
            current.runner = _register_native(native, redeclared=True)
    _show_runner(current.op, current.runner)
    current.forward, current.forward_fake = forward, forward_fake
    if spec.backward is not None:
        current.backward, current.backward_fake, current.autograd = backward, backward_fake, autograd
    return current.op


def _define_fresh(torch, spec, current, native, forward, trusted):
    """Defines the op of a name this process has not registered (and its ``_backward`` op) in a new
    torch.library fragment, registers their fakes and kernels (native, else the Python trampolines), sets
    ``current.op``; returns (Runner, the Autograd kernel of the Python runner or None without a backward).

    All or nothing: on any error the fragment is destroyed before the error propagates. ``Library._destroy``
    removes the definitions, fakes and kernels and, unlike the fragment's finalizer, drops the packets torch.ops
    cached for them (an OpOverload left there would point at a removed definition: torch's stale-handle crash), so
    the name is free again. The native kernels are registered last: the add-on validates a description before it
    registers anything, so a refusal leaves nothing behind in C++ either."""
    namespace, _, short = spec.name.partition("::")
    library = torch.library.Library(namespace, "FRAGMENT")
    try:
        ops = getattr(torch.ops, namespace)
        t_forward, t_forward_fake, t_backward, t_backward_fake, t_autograd = current.trampolines()

        def define(name, schema, fake):
            try:
                library.define(schema)
            except RuntimeError as e:
                if "multiple times" not in str(e):
                    raise
                raise OpDeclarationError(f"{namespace}::{name}: an op of this name is already registered in this "
                                         f"process by other code than a jitbridge declaration (torch.library names "
                                         f"are process-wide); choose another name, or use jitbridge.torch.function "
                                         f"for an unregistered op") from e
            torch.library.register_fake(f"{namespace}::{name}", fake, lib=library)
            return getattr(ops, name).default

        current.op = define(short, current.schemas[0], t_forward_fake)
        autograd = None
        if spec.backward is not None:
            backward_op = define(short + "_backward", current.schemas[1], t_backward_fake)
            autograd = _autograd_kernel(spec, torch, current.op, forward, backward_op, trusted)
        runner = _register_native(native) if native is not None else None
        if runner is None or runner.kind == "python":
            runner = runner or Runner("python", _native_reason)
            for key in ("CUDA", "CPU"):
                library.impl(short, t_forward, key)
                if spec.backward is not None:
                    library.impl(short + "_backward", t_backward, key)
            if spec.backward is not None:
                library.impl(short, t_autograd, "Autograd", with_keyset=True)
    except BaseException:
        library._destroy()
        raise
    _LIBRARIES.append(library)
    return runner, autograd


_native_reason = None  # why the last _native_plan() gave None
_OP_CLASSES = {}       # torch's OpOverload class -> its subclass whose repr names the runner


def _show_runner(op, runner):
    """Makes ``op`` (the OpOverload custom_op returns) say its runner: the attribute ``jitbridge_runner`` and one
    more clause in its repr, through a subclass of OpOverload that adds only ``__repr__`` (isinstance checks, and
    everything else torch.compile and the dispatcher read, are unchanged)."""
    base = type(op)
    if base in _OP_CLASSES.values():
        base = base.__mro__[1]
    cls = _OP_CLASSES.get(base)
    if cls is None:
        def __repr__(self):
            shown = base.__repr__(self)
            r = getattr(self, "jitbridge_runner", None)
            return shown if r is None else f"{shown[:-1]}; jitbridge runner: {r.kind} ({r.reason})>"
        cls = _OP_CLASSES[base] = type(base.__name__, (base,), {"__repr__": __repr__, "__slots__": (),
                                                                "__module__": __name__})
    try:
        op.jitbridge_runner = runner
        if type(op) is not cls:
            op.__class__ = cls
    except (AttributeError, TypeError):  # a torch whose OpOverload takes no attributes: jt.runner(op) still says
        pass


def _native_plan(spec, torch, current):
    """(add-on, description, kernels) to register ``spec`` natively, or None with the reason in _native_reason:
    a rule that is no expression, the add-on off or unavailable (torch_native; it warns once), an op first declared
    with the Python runner."""
    global _native_reason
    from . import addon as native_addon, description
    if current is not None and current.runner.kind == "python":
        _native_reason = "first declared with the Python runner in this process: " + current.runner.reason
        return None
    try:
        text, kernels = description.describe(spec)
    except NotExpressible as e:
        _native_reason = f"a rule is a Python callable: {e}"
        return None
    addon = native_addon.load(torch)
    if addon is None:
        _native_reason = f"the native add-on is unavailable: {native_addon.unavailable_reason()}"
        return None
    return addon, text, kernels


def _register_native(native, redeclared=False):
    """Registers the native kernels; a Runner. A refusal by the add-on is an error with JITBRIDGE_TORCH_NATIVE=1
    or on a re-declaration, else the Python runner with the reason."""
    from . import addon as native_addon
    addon, text, kernels = native
    try:
        addon.register(text, kernels)
    except RuntimeError as e:
        if redeclared or native_addon.mode() == "required":
            raise OpDeclarationError(f"the native runner refused the declaration: {e}") from e
        return Runner("python", f"the native runner refused the declaration: {e}")
    return Runner("native", f"torch add-on {addon.path}")


def _autograd_kernel(spec, torch, op, run_forward, backward_op, run_backward):
    """The op's Autograd-key kernel (called with the dispatch key set first): with grad mode on and an input that
    requires grad it applies a torch.autograd.Function whose forward runs the op below autograd and whose backward
    runs the ``_backward`` op; otherwise it runs the op below autograd."""
    link = _AutogradLink(spec)
    C = torch._C
    below, after = C._AutoDispatchBelowAutograd, C._after_autograd_keyset
    grad_enabled, any_requires_grad = C.is_grad_enabled, C._any_requires_grad
    eager_args = _eager_test(torch, tuple(i for i, (_, kind) in enumerate(spec.inputs) if kind == "Tensor"))
    eager_grads = _eager_test(torch, tuple(range(len(spec.grad_outputs))))

    def forward_below(keyset, args):
        if eager_args(args):
            return run_forward(*args)
        with below():
            return op.redispatch(keyset & after, *args)

    class Autograd(torch.autograd.Function):
        @staticmethod
        def forward(ctx, keyset, *args):
            result = forward_below(keyset, args)
            link.setup_context(ctx, args, result)
            return result

        @staticmethod
        def backward(ctx, *grads):
            run = run_backward if not grad_enabled() and eager_grads(grads) else backward_op
            return None, *link.backward(ctx, grads, run)

    Autograd.__name__ = Autograd.__qualname__ = f"{spec.name.replace('::', '_')}_autograd"
    apply = Autograd.apply

    def autograd_kernel(keyset, *args):
        if grad_enabled() and any_requires_grad(*args):
            return apply(keyset, *args)
        return forward_below(keyset, args)

    return autograd_kernel


def _make_function(spec):
    """A callable running ``spec`` through a torch.autograd.Function subclass (eager only)."""
    torch = _import_torch("function")
    run_forward = _phase_runner(spec.forward, spec.contiguous, torch, fake=False)
    run_backward = (_phase_runner(spec.backward, spec.contiguous, torch, fake=False, trusted=True)
                    if spec.backward else None)
    link = _AutogradLink(spec) if spec.backward else None
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
            return tuple(link.backward(ctx, grads, run_backward))

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
