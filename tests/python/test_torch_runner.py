"""The compiled op runner (jitbridge/torch/compiled.py) and the eager-path test of jitbridge.torch, without a GPU or torch:
a stand-in for torch (test_torch_declare's) and stand-in kernels that record their launches.

What is checked: each kind of launch value reaches the kernel as declared (names, constants, numel/size, positional,
keyword and **kwargs callables, shared memory rules, grids with a zero dimension skipped); the trusted backward
leaves out the device and dtype checks but still makes strided tensors dense; the fake runner only allocates; op
names that are not Python identifiers; and which tensors may skip the dispatcher."""
import types

import pytest

import jitbridge
import jitbridge.torch as jt
from jitbridge._opphase import Value
from jitbridge.torch import Launch, Output, numel, size
from test_torch_declare import _Device, _FakeTensor, _stand_in_torch

SRC = r'''
extern "C" __global__ void k3(const float* x, float* y, long long n) {}
extern "C" __global__ void k5(const float* x, float* y, long long n, int a, float b) {}
extern "C" __global__ void kb(const float* gy, float* gx, long long n) {}
extern "C" __global__ void kn(const float* x, long long* count, float* s) {}
'''
CUDA = _Device("cuda")


@pytest.fixture(scope="module")
def kernels():
    module = jitbridge.RawModule(code=SRC, arch="sm_90")
    return types.SimpleNamespace(**{n: module.get_function(n) for n in ("k3", "k5", "kb", "kn")})


class Strided(_FakeTensor):
    """A stand-in tensor that is not contiguous until .contiguous() is called (which is recorded)."""

    made_dense = []

    def is_contiguous(self):
        return False

    def contiguous(self):
        Strided.made_dense.append(self)
        return _FakeTensor(self.shape, self.dtype, self.device)


def recorded(spec, launches):
    """Replaces every kernel of ``spec``'s phases by a stand-in recording (name, grid, block, args, shared_mem)."""
    for phase in (spec.forward, spec.backward):
        for plan in phase.launches if phase else ():
            def fake(name):
                return lambda grid, block, args, shared_mem=0: launches.append((name, grid, block, args, shared_mem))
            plan.kernels = {key: fake(k.name) for key, k in plan.kernels.items()}
            plan.single = plan.kernels.get(None)
    return spec


def declare(monkeypatch, **declaration):
    monkeypatch.setattr(jt, "_register_custom_op", lambda spec: spec)
    return jt.custom_op("tests::runner", **declaration)


def test_every_kind_of_launch_value_reaches_the_kernel(monkeypatch, kernels):
    def by_keyword(*, x):                     # keyword-only: called as by_keyword(x=...)
        return x.shape[0] * 10

    def everything(**names):                  # **kwargs: gets every name defined so far
        return len(names)

    launches = []
    spec = recorded(declare(
        monkeypatch, inputs=("x", "a: int"), outputs={"y": Output(like="x")},
        forward=[Launch(kernels.k5, args=("x", "y", numel("x"), "a", 2.5), grid=size("x", 0), block=(32, 2),
                        shared_mem=lambda a: a * 4),
                 Launch(kernels.k5, args=("x", "y", by_keyword, everything, 0.5), grid=lambda x: (x.shape[0], 0),
                        block=64),                           # a zero grid dimension: not launched
                 Launch(kernels.k3, args=("x", "y", lambda x, a: x.numel() + a), grid=7, block=32, shared_mem=16)]),
        launches)
    torch = _stand_in_torch()
    run = jt._phase_runner(spec.forward, True, torch, fake=False)
    x = _FakeTensor((3, 4), torch.float32, CUDA)
    y = run(x, 5)
    assert y.shape == (3, 4)
    assert launches == [("k5", 3, (32, 2), (x, y, 12, 5, 2.5), 20), ("k3", 7, 32, (x, y, 17), 16)]
    assert "def tests__runner_forward(v0, v1):" in run.jitbridge_source
    launches.clear()
    # With a grid that launches, by_keyword and everything are evaluated too (plans are read when a runner is made).
    spec.forward.launches[1].grid = Value("positional", lambda x: x.shape[0], ("x",))
    run = jt._phase_runner(spec.forward, True, torch, fake=False)
    y = run(x, 5)
    assert launches[1] == ("k5", 3, 64, (x, y, 30, 3, 0.5), 0)   # everything saw x, a and y


def test_trusted_backward_skips_the_checks_but_makes_tensors_dense(monkeypatch, kernels):
    launches = []
    spec = recorded(declare(
        monkeypatch, inputs=("x",), outputs={"y": Output(like="x")},
        forward=Launch(kernels.k3, args=("x", "y", numel("x")), grid=1, block=32),
        backward=Launch(kernels.kb, args=("grad_y", "grad_x", numel("grad_y")), grid=1, block=32),
        grads={"x": Output(like="grad_y")}), launches)
    torch = _stand_in_torch()
    checked = jt._phase_runner(spec.backward, True, torch, fake=False)
    trusted = jt._phase_runner(spec.backward, True, torch, fake=False, trusted=True)
    wrong = _FakeTensor((8,), torch.float64, CUDA)              # the checked runner refuses this dtype
    with pytest.raises(TypeError, match="grad_y has dtype float64"):
        checked(wrong)
    assert launches == []
    trusted(wrong)
    assert [name for name, *_ in launches] == ["kb"]
    assert "has dtype" not in trusted.jitbridge_source and "get_device" not in trusted.jitbridge_source
    Strided.made_dense.clear()
    strided = Strided((8,), torch.float32, CUDA)
    trusted(strided)
    assert Strided.made_dense == [strided] and launches[-1][3][0] is not strided


def test_fake_runner_allocates_outputs_only_and_refuses_cpu(monkeypatch, kernels):
    launches = []
    spec = recorded(declare(
        monkeypatch, inputs=("x",), outputs={"y": Output(like="x"), "n": Output(shape=(1,), dtype="int64")},
        forward=[Launch(kernels.k3, args=("x", "y", numel("x")), grid=1, block=32),
                 Launch(kernels.kn, args=("x", "n", "s"), grid=1, block=32)],
        scratch={"s": Output(like="x")}), launches)
    torch = _stand_in_torch()
    fake = jt._phase_runner(spec.forward, True, torch, fake=True)
    meta = _FakeTensor((2, 3), torch.float32, _Device("meta"))
    y, n = fake(meta)
    assert (y.shape, n.shape, n.dtype) == ((2, 3), (1,), torch.int64) and launches == []
    assert "v3 =" not in fake.jitbridge_source          # no scratch either
    with pytest.raises(ValueError, match="x is a cpu tensor; this op's kernels run on CUDA tensors"):
        fake(_FakeTensor((2, 3), torch.float32, _Device("cpu")))
    with pytest.raises(TypeError, match="x must be a tensor, got int"):
        fake(3)


def test_labels_that_are_not_identifiers_compile(monkeypatch, kernels):
    spec = jt.OpSpec("my op (v2)!", inputs=("x",), outputs={"y": Output(like="x")},
                     forward=Launch(kernels.k3, args=("x", "y", numel("x")), grid=1, block=32), qualified=False)
    run = jt._phase_runner(spec.forward, True, _stand_in_torch(), fake=False)
    assert run.__name__.isidentifier() and run.__name__.startswith("my_op__v2")


class _Param(_FakeTensor):
    pass


def test_eager_test_takes_plain_cuda_tensors_only():
    torch = _stand_in_torch()
    torch.nn = types.SimpleNamespace(Parameter=_Param)
    depth = {"modes": 0, "transforms": False}
    torch._C = types.SimpleNamespace(_len_torch_dispatch_stack=lambda: depth["modes"],
                                     _are_functorch_transforms_active=lambda: depth["transforms"])
    eager = jt._eager_test(torch, (0, 2))
    x = _FakeTensor((2,), torch.float32, CUDA)
    assert eager((x, 1.0, _Param((2,), torch.float32, CUDA)))
    assert eager((x, 1.0, None))                                  # a missing gradient does not decide
    assert not eager((_FakeTensor((2,), torch.float32, _Device("meta")), 1.0, x))
    assert not eager((x, 1.0, Strided((2,), torch.float32, CUDA)))  # a subclass may dispatch on its own
    depth["modes"] = 1
    assert not eager((x, 1.0, x))
    depth.update(modes=0, transforms=True)
    assert not eager((x, 1.0, x))


class _Library:
    """torch.library.Library's stand-in: records definitions and kernels; a second definition of a name fails as
    torch's does; _destroy removes the fragment's definitions."""

    defined = {}

    def __init__(self, namespace, kind):
        self.namespace, self.names = namespace, []

    def define(self, schema):
        name = f"{self.namespace}::{schema.split('(')[0]}"
        if name in _Library.defined:
            raise RuntimeError(f"{name} defined multiple times")
        _Library.defined[name] = {"schema": schema}
        self.names.append(name)

    def impl(self, name, fn, key, with_keyset=False):
        _Library.defined[f"{self.namespace}::{name}"][key] = fn

    def _destroy(self):
        for name in self.names:
            del _Library.defined[name]
        self.names.clear()


def _registering_torch():
    torch = _stand_in_torch()
    torch.nn = types.SimpleNamespace(Parameter=_Param)

    class Function:
        @classmethod
        def apply(cls, *args):
            return cls.forward(types.SimpleNamespace(save_for_backward=lambda *t: None), *args)

    torch.autograd = types.SimpleNamespace(Function=Function)
    torch._C = types.SimpleNamespace(_len_torch_dispatch_stack=lambda: 0, _are_functorch_transforms_active=lambda: 0,
                                     _AutoDispatchBelowAutograd=None, _after_autograd_keyset=None,
                                     is_grad_enabled=lambda: False, _any_requires_grad=lambda *a: False)
    fakes = {}

    class Namespace:
        def __getattr__(self, name):
            return types.SimpleNamespace(default=f"OpOverload({name})")

    torch.library = types.SimpleNamespace(Library=_Library, register_fake=lambda name, fn, lib: fakes.update({name: fn}))
    torch.ops = types.SimpleNamespace(tests_redeclare=Namespace())
    torch.fakes = fakes
    return torch


def test_redeclaring_an_op_swaps_what_its_registered_kernels_run(monkeypatch, kernels):
    """With torch.library stood in: the first declaration registers trampolines, a second one with the same schema
    swaps the runners behind them (no new registration), one changing the schema is refused and leaves the op."""
    torch = _registering_torch()
    monkeypatch.setattr(jt, "_import_torch", lambda what: torch)
    monkeypatch.setattr(jt, "_REGISTERED", {})
    monkeypatch.setattr(_Library, "defined", {})
    launches = []

    def declaration(kernel_name, backward=True):
        d = dict(inputs=("x",), outputs={"y": Output(like="x")},
                 forward=Launch(lambda grid, block, args, name=kernel_name: launches.append(name), args=("x", "y", 1),
                                grid=1, block=32))
        if backward:
            d.update(grads={"x": Output(like="grad_y")},
                     backward=Launch(lambda grid, block, args: launches.append("bwd"), args=("grad_y", "grad_x"),
                                     grid=1, block=32))
        return d

    op = jt.custom_op("tests_redeclare::op", **declaration("first"))
    registered = _Library.defined["tests_redeclare::op"]
    cuda_kernel, autograd = registered["CUDA"], registered["Autograd"]
    x = _FakeTensor((4,), torch.float32, CUDA)
    cuda_kernel(x)
    autograd(None, x)                                   # grad mode off: runs the forward below autograd
    assert launches == ["first", "first"]
    assert jt.custom_op("tests_redeclare::op", **declaration("second")) == op
    assert _Library.defined["tests_redeclare::op"] is registered and registered["CUDA"] is cuda_kernel
    launches.clear()
    cuda_kernel(x)
    autograd(None, x)
    torch.fakes["tests_redeclare::op"](_FakeTensor((4,), torch.float32, _Device("meta")))
    assert launches == ["second", "second"]
    with pytest.raises(jt.OpDeclarationError, match="must keep its schema"):
        jt.custom_op("tests_redeclare::op", **declaration("third", backward=False))
    launches.clear()
    cuda_kernel(x)
    assert launches == ["second"]
    _Library.defined["tests_redeclare::other"] = {"schema": "other(Tensor x) -> Tensor"}   # not ours
    with pytest.raises(jt.OpDeclarationError, match="already registered in this process by other code"):
        jt.custom_op("tests_redeclare::other", **declaration("x"))


def test_a_redeclaration_keeps_which_inputs_have_gradients(monkeypatch, kernels):
    """grads={"x"} then {"w"}: the same schemas (the backward returns one Tensor either way), but a graph recorded
    under the first would give the second backward's result to x; refused before anything is swapped, naming both.
    Keeping the keys (other kernels) is a re-declaration like any other."""
    torch = _registering_torch()
    monkeypatch.setattr(jt, "_import_torch", lambda what: torch)
    monkeypatch.setattr(jt, "_REGISTERED", {})
    monkeypatch.setattr(_Library, "defined", {})
    launches = []

    def declaration(grads, kernel_name="bwd"):
        return dict(inputs=("x", "w"), outputs={"y": Output(like="x")},
                    forward=Launch(lambda grid, block, args: launches.append("fwd"), args=("x", "w", "y"), grid=1,
                                   block=32),
                    save=("x", "w"),
                    backward=Launch(lambda grid, block, args, name=kernel_name: launches.append(name),
                                    args=("x", "w", "grad_y") + tuple("grad_" + g for g in grads), grid=1, block=32),
                    grads={g: Output(like=g) for g in grads})

    op = jt.custom_op("tests_redeclare::pair", **declaration("x"))
    backward = _Library.defined["tests_redeclare::pair_backward"]
    assert backward["schema"] == "pair_backward(Tensor x, Tensor w, Tensor grad_y) -> Tensor"
    with pytest.raises(jt.OpDeclarationError) as refused:
        jt.custom_op("tests_redeclare::pair", **declaration("w"))
    assert str(refused.value) == (
        "tests_redeclare::pair: this process declared the op with gradients for x; a re-declaration replaces its "
        "kernels but must keep which inputs have gradients, here w (an autograd graph recorded before would give the "
        "new backward's results to the inputs it was recorded for): keep the keys of grads=, or choose another name")
    with pytest.raises(jt.OpDeclarationError, match="gradients for x; .* here x, w "):  # not the schema's message
        jt.custom_op("tests_redeclare::pair", **declaration("xw"))
    x, w = _FakeTensor((4,), torch.float32, CUDA), _FakeTensor((4,), torch.float32, CUDA)
    backward["CUDA"](x, w, x)
    assert launches == ["bwd"]                            # the refused declarations swapped nothing in
    assert jt.custom_op("tests_redeclare::pair", **declaration("x", "bwd2")) == op
    backward["CUDA"](x, w, x)
    assert launches == ["bwd", "bwd2"]


def test_a_fresh_declaration_failing_after_its_definition_is_undone(monkeypatch, kernels):
    """The forward defined, then the _backward name turns out taken by other code: the fragment is destroyed (the
    forward's definition with it), nothing is recorded as registered, and the name can be declared again."""
    torch = _registering_torch()
    monkeypatch.setattr(jt, "_import_torch", lambda what: torch)
    monkeypatch.setattr(jt, "_REGISTERED", {})
    monkeypatch.setattr(_Library, "defined", {"tests_redeclare::late_backward": {"schema": "late_backward(Tensor x)"}})
    libraries = list(jt._LIBRARIES)
    decl = dict(inputs=("x",), outputs={"y": Output(like="x")},
                forward=Launch(lambda grid, block, args: None, args=("x", "y"), grid=1, block=32),
                backward=Launch(lambda grid, block, args: None, args=("grad_y", "grad_x"), grid=1, block=32),
                grads={"x": Output(like="grad_y")})
    with pytest.raises(jt.OpDeclarationError, match="late_backward: an op of this name is already registered"):
        jt.custom_op("tests_redeclare::late", **decl)
    assert "tests_redeclare::late" not in _Library.defined and "tests_redeclare::late" not in jt._REGISTERED
    assert jt._LIBRARIES == libraries
    del _Library.defined["tests_redeclare::late_backward"]   # the other code goes away
    assert jt.custom_op("tests_redeclare::late", **decl) == "OpOverload(late)"
    assert set(_Library.defined) == {"tests_redeclare::late", "tests_redeclare::late_backward"}
    assert "CUDA" in _Library.defined["tests_redeclare::late"] and jt.runner("tests_redeclare::late").kind == "python"
    jt._LIBRARIES[:] = libraries
