"""jitbridge.torch's native runner with torch but no GPU needed: the C++ Autograd kernel and node on meta tensors
(shapes flow through the registered fakes), so the parts of the add-on that do not launch are tested wherever torch
imports: the node's gradients and their shapes, retain_graph and backward twice, double backward refused,
torch.compile(fullgraph=True, backend="aot_eager") tracing the op and its _backward op, opcheck, the CPU kernel's
ValueError, and a Check failing in the fake. Skipped without torch; the add-on is built at first use (a failure to
build fails these tests: JITBRIDGE_TORCH_NATIVE=1)."""
import os

import pytest

torch = pytest.importorskip("torch")

import jitbridge  # noqa: E402
import jitbridge.torch as jt  # noqa: E402
from jitbridge.torch import Launch, Output, numel  # noqa: E402

SRC = r'''
template <class T> __global__ void fwd(const T* x, const T* w, T* y, long long n) {}
template <class T> __global__ void bwd(const T* x, const T* w, const T* gy, T* gx, T* gw, long long n) {}
'''


@pytest.fixture(scope="module")
def op():
    m = jitbridge.RawModule(code=SRC, arch="sm_90", name_expressions=[f"{k}<{t}>" for k in ("fwd", "bwd")
                                                                      for t in ("float", "double")])

    def per_dtype(k):
        return {"float32": m.get_function(f"{k}<float>"), "float64": m.get_function(f"{k}<double>")}
    old = os.environ.get("JITBRIDGE_TORCH_NATIVE")
    os.environ["JITBRIDGE_TORCH_NATIVE"] = "1"
    try:
        return jt.custom_op(
            "jitbridge_meta_tests::mul", inputs=("x", "w"), outputs={"y": Output(like="x")},
            check=jt.Check(lambda x, w: (w.dim() == 1) & (x.shape[-1] == w.shape[0]), "w must be [C] for x [..., C]"),
            forward=Launch(per_dtype("fwd"), args=("x", "w", "y", numel("x")), grid=lambda x: jt.cdiv(x.numel(), 256),
                           block=256),
            save=("x", "w"),
            backward=Launch(per_dtype("bwd"), args=("x", "w", "grad_y", "grad_x", "grad_w", numel("x")),
                            grid=lambda x: jt.cdiv(x.numel(), 256), block=256),
            grads={"x": Output(like="x"), "w": Output(like="w")})
    finally:
        if old is None:
            del os.environ["JITBRIDGE_TORCH_NATIVE"]
        else:
            os.environ["JITBRIDGE_TORCH_NATIVE"] = old


def meta(*shape):
    return torch.empty(*shape, device="meta", requires_grad=True)


def test_native_node_on_meta_tensors(op):
    assert jt.runner(op).kind == "native"
    x, w = meta(4, 8), meta(8)
    y = op(x, w)
    assert y.shape == (4, 8) and y.grad_fn.name() == "jitbridge_meta_tests::mul_jitbridge_backward"
    gx, gw = torch.autograd.grad(y.sum(), (x, w))
    assert gx.shape == (4, 8) and gw.shape == (8,) and gx.device.type == "meta"
    with torch.no_grad():
        assert op(x, w).grad_fn is None


def test_retain_graph_then_backward_twice_fails(op):
    x, w = meta(3, 5), meta(5)
    loss = op(x, w).sum()
    torch.autograd.grad(loss, (x, w), retain_graph=True)
    torch.autograd.grad(loss, (x, w))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(loss, (x, w))


def test_double_backward_refused(op):
    x, w = meta(3, 5), meta(5)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(op(x, w).sum(), (x, w), create_graph=True)


def test_compile_traces_the_op_and_its_backward(op):
    graphs = []

    def backend(gm, example_inputs):
        from functorch.compile import make_boxed_func
        from torch._functorch.aot_autograd import aot_module_simplified

        def keep(g, _):
            graphs.append(g.code)
            return make_boxed_func(g.forward)
        return aot_module_simplified(gm, example_inputs, fw_compiler=keep, bw_compiler=keep)

    compiled = torch.compile(lambda x, w: op(x, w).sum(), backend=backend, fullgraph=True)
    x, w = meta(6, 7), meta(7)
    gx, gw = torch.autograd.grad(compiled(x, w), (x, w))
    assert gx.shape == (6, 7) and gw.shape == (7,)
    assert any("jitbridge_meta_tests.mul.default" in g for g in graphs)
    assert any("jitbridge_meta_tests.mul_backward.default" in g for g in graphs)


def test_opcheck_on_meta(op):
    torch.library.opcheck(op, (meta(4, 8), meta(8)),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor",
                                      "test_aot_dispatch_dynamic"))


def test_cpu_tensors_and_failed_checks_raise(op):
    with pytest.raises(ValueError, match="jitbridge_meta_tests::mul: x is a cpu tensor"):
        op(torch.randn(2, 3), torch.randn(3))
    with pytest.raises(ValueError, match=r"w must be \[C\] for x \[..., C\]; got x \[2, 3\], w \[4\]"):
        op(meta(2, 3), meta(4))
