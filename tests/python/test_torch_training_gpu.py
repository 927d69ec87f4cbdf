"""jitbridge.torch in training, on the GPU: the GPT example's ops (examples/torch/gpt_ops.py: layer norm, layer
norm with the residual add before it, causal softmax) against eager PyTorch, gradcheck, opcheck, torch.compile,
CUDA graphs and a side stream; the compiled runner's direct eager path against the dispatcher path (a
TorchDispatchMode sees the ops); and the GPT example's loss curve against the eager model's.

Inputs are fresh random data; torch's caching allocator is first filled with NaN so an unwritten element shows."""
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu]
torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from test_torch_ops_gpu import (NO_AUTOGRAD_CHECK, load_example_ops, poison_allocator, subprocess_env,  # noqa: E402
                                warm_up_on_side_stream)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "torch"


@pytest.fixture(scope="module")
def gpt_ops():
    ops = load_example_ops()        # puts examples/torch on sys.path; gpt_ops imports ops from there
    module = importlib.import_module("gpt_ops")
    module.example_ops = ops
    return module


def ln_reference(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def softmax_reference(s, scale):
    T = s.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool, device=s.device).triu(1)
    return torch.softmax((s * scale).masked_fill(mask, float("-inf")), dim=-1)


def close(dtype, loose=1):
    return {"rtol": 1e-5 * loose, "atol": 1e-5 * loose} if dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-9}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(4, 64, 128), (37, 5), (3, 1000), (2, 2048), (300, 1)])
def test_layer_norm_matches_eager(gpt_ops, dtype, shape):
    C = shape[-1]
    x = (3 * torch.randn(shape, device="cuda", dtype=dtype) + 1).requires_grad_()
    w = torch.randn(C, device="cuda", dtype=dtype, requires_grad=True)
    b = torch.randn(C, device="cuda", dtype=dtype, requires_grad=True)
    grad_y = torch.randn(shape, device="cuda", dtype=dtype)
    poison_allocator()
    y = gpt_ops.layer_norm(x, w, b)
    grads = torch.autograd.grad(y, (x, w, b), grad_y)
    y_ref = ln_reference(x, w, b)
    grads_ref = torch.autograd.grad(y_ref, (x, w, b), grad_y)
    torch.testing.assert_close(y, y_ref, **close(dtype, 10))
    for g, g_ref in zip(grads, grads_ref):      # grad_w and grad_b sum over all rows: other order, other bits
        torch.testing.assert_close(g, g_ref, **close(dtype, 100))


def add_ln_inputs(shape, dtype):
    C = shape[-1]
    x = (3 * torch.randn(shape, device="cuda", dtype=dtype) + 1).requires_grad_()
    h = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    h_bias, w, b = (torch.randn(C, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    return x, h, h_bias, w, b


def add_ln_reference(x, h, h_bias, w, b):
    s = x + (h + h_bias)            # as the eager model adds: the linear's bias first, then the residual
    return s, ln_reference(s, w, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(4, 64, 128), (37, 5), (3, 1000), (2, 2048), (300, 1), (17,)])
@pytest.mark.parametrize("gradients", ["s and y", "y only"])
def test_add_layer_norm_matches_eager(gpt_ops, dtype, shape, gradients):
    """Both outputs and all five gradients; with "y only" autograd has no gradient for s (the GPT model's last
    norm), so the op's backward gets zeros for it."""
    inputs = add_ln_inputs(shape, dtype)
    grad_s, grad_y = torch.randn(shape, device="cuda", dtype=dtype), torch.randn(shape, device="cuda", dtype=dtype)
    poison_allocator()
    s, y = gpt_ops.add_layer_norm(*inputs)
    s_ref, y_ref = add_ln_reference(*inputs)
    torch.testing.assert_close(s, s_ref, rtol=0, atol=0)
    torch.testing.assert_close(y, y_ref, **close(dtype, 10))
    if gradients == "y only":
        grads, grads_ref = (torch.autograd.grad(out, inputs, grad_y) for out in (y, y_ref))
    else:
        grads, grads_ref = (torch.autograd.grad(outs, inputs, (grad_s, grad_y)) for outs in ((s, y), (s_ref, y_ref)))
    for g, g_ref in zip(grads, grads_ref):      # the [C] gradients sum over all rows: other order, other bits
        torch.testing.assert_close(g, g_ref, **close(dtype, 100))
    assert grads[0] is not grads[1] and grads[0].data_ptr() != grads[1].data_ptr()   # x and h: two tensors


def test_add_layer_norm_gradcheck_and_opcheck(gpt_ops):
    for shape in ((5, 6), (2, 3, 33)):
        assert torch.autograd.gradcheck(gpt_ops.add_layer_norm, add_ln_inputs(shape, torch.float64))
    inputs = add_ln_inputs((8, 48), torch.float32)
    torch.library.opcheck(gpt_ops.add_layer_norm, inputs)
    s = gpt_ops.add_layer_norm(*inputs)[0].detach()
    w = inputs[3].detach()
    torch.library.opcheck(torch.ops.jitbridge_gpt.add_layer_norm_backward.default,
                          (s, w, torch.randn_like(s), torch.randn_like(s)), test_utils=NO_AUTOGRAD_CHECK)


def test_add_layer_norm_refuses_mismatched_shapes(gpt_ops):
    x, h, h_bias, w, b = (t.detach() for t in add_ln_inputs((4, 6, 8), torch.float32))
    shape_error = r"add_layer_norm: x must have shape \[C\], \[N, C\] or \[B, T, C\], and h the shape of x"
    for bad_h in (h.reshape(6, 4, 8), h.reshape(24, 8), h[:, :5]):
        with pytest.raises(ValueError, match=shape_error):
            gpt_ops.add_layer_norm(x, bad_h, h_bias, w, b)
    with pytest.raises(ValueError, match=shape_error):
        gpt_ops.add_layer_norm(x.reshape(2, 2, 6, 8), h.reshape(2, 2, 6, 8), h_bias, w, b)
    with pytest.raises(ValueError, match=r"h_bias must have shape \[C\] for x of shape \[\.\.\., C\]"):
        gpt_ops.add_layer_norm(x, h, torch.randn(7, device="cuda"), w, b)
    with pytest.raises(ValueError, match=r"weight and bias must have shape \[C\]"):
        gpt_ops.add_layer_norm(x, h, h_bias, w[:7], b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 4, 64, 64), (1, 1, 7, 7), (3, 300, 300), (1, 1)])
def test_causal_softmax_matches_eager(gpt_ops, dtype, shape):
    s = (4 * torch.randn(shape, device="cuda", dtype=dtype)).requires_grad_()
    grad_y = torch.randn(shape, device="cuda", dtype=dtype)
    poison_allocator()
    y = gpt_ops.causal_softmax(s, 0.125)
    (g,) = torch.autograd.grad(y, s, grad_y)
    y_ref = softmax_reference(s, 0.125)
    (g_ref,) = torch.autograd.grad(y_ref, s, grad_y)
    torch.testing.assert_close(y, y_ref, **close(dtype))
    torch.testing.assert_close(g, g_ref, **close(dtype))
    assert bool((y.detach().triu(1) == 0).all())       # masked entries are exactly zero, not NaN


def test_gradcheck_and_opcheck(gpt_ops):
    double = {"device": "cuda", "dtype": torch.float64, "requires_grad": True}
    for C in (6, 33):
        x, w, b = torch.randn(5, C, **double), torch.randn(C, **double), torch.randn(C, **double)
        assert torch.autograd.gradcheck(gpt_ops.layer_norm, (x, w, b))
    assert torch.autograd.gradcheck(lambda s: gpt_ops.causal_softmax(s, 0.7), (torch.randn(2, 5, 5, **double),))
    x = torch.randn(8, 48, device="cuda", requires_grad=True)
    w, b = torch.randn(48, device="cuda", requires_grad=True), torch.randn(48, device="cuda", requires_grad=True)
    torch.library.opcheck(gpt_ops.layer_norm, (x, w, b))
    s = torch.randn(2, 16, 16, device="cuda", requires_grad=True)
    torch.library.opcheck(gpt_ops.causal_softmax, (s, 0.25))
    ns = torch.ops.jitbridge_gpt
    torch.library.opcheck(ns.layer_norm_backward.default, (x.detach(), w.detach(), torch.randn_like(x)),
                          test_utils=NO_AUTOGRAD_CHECK)
    y = gpt_ops.causal_softmax(s, 0.25).detach()
    torch.library.opcheck(ns.causal_softmax_backward.default, (y, torch.randn_like(y), 0.25),
                          test_utils=NO_AUTOGRAD_CHECK)


def test_bad_inputs_name_the_argument(gpt_ops):
    x = torch.randn(4, 2049, device="cuda")
    with pytest.raises(ValueError, match=r"layer_norm: the last dimension must be 1 to 2048; got x \[4, 2049\]"):
        gpt_ops.layer_norm(x, torch.randn(2049, device="cuda"), torch.randn(2049, device="cuda"))
    with pytest.raises(ValueError, match=r"weight and bias must have shape \[C\]"):
        gpt_ops.layer_norm(torch.randn(4, 8, device="cuda"), torch.randn(7, device="cuda"),
                           torch.randn(8, device="cuda"))
    with pytest.raises(ValueError, match=r"causal_softmax: x must have shape \[\.\.\., T, T\]"):
        gpt_ops.causal_softmax(torch.randn(3, 4, 5, device="cuda"), 1.0)
    with pytest.raises(TypeError, match="bias has dtype float64, expected float32"):
        gpt_ops.layer_norm(torch.randn(2, 8, device="cuda"), torch.randn(8, device="cuda"),
                           torch.randn(8, device="cuda", dtype=torch.float64))


class Recorder(TorchDispatchMode):
    """Records the ops that reach the dispatcher's Python mode."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def test_eager_fast_path_and_dispatcher_path_agree(gpt_ops):
    """Plain CUDA tensors in eager mode skip the dispatcher inside the op; under a TorchDispatchMode the op and its
    backward op go through it (the mode sees both), with bit-identical results."""
    fused = gpt_ops.example_ops.fused_bias_gelu
    x = torch.randn(64, 96, device="cuda", requires_grad=True)
    bias = torch.randn(96, device="cuda", requires_grad=True)
    grad_y = torch.randn(64, 96, device="cuda")
    y = fused(x, bias)
    grads = torch.autograd.grad(y, (x, bias), grad_y)
    recorder = Recorder()
    with recorder:
        y_mode = fused(x, bias)
        grads_mode = torch.autograd.grad(y_mode, (x, bias), grad_y)
    assert "jitbridge_examples.fused_bias_gelu.default" in recorder.seen
    assert "jitbridge_examples.fused_bias_gelu_backward.default" in recorder.seen
    torch.testing.assert_close(y_mode, y, rtol=0, atol=0)
    for g, g_mode in zip(grads, grads_mode):
        torch.testing.assert_close(g_mode, g, rtol=0, atol=0)


def test_backward_makes_a_strided_incoming_gradient_dense(gpt_ops):
    """The backward skips the forward's device and dtype checks but still makes incoming gradients contiguous."""
    s = torch.randn(3, 32, 32, device="cuda", requires_grad=True)
    grad_y = torch.randn(3, 32, 64, device="cuda")[..., ::2]            # not contiguous
    (g,) = torch.autograd.grad(gpt_ops.causal_softmax(s, 0.5), s, grad_y)
    (g_ref,) = torch.autograd.grad(softmax_reference(s, 0.5), s, grad_y)
    torch.testing.assert_close(g, g_ref)


def block_step(gpt_ops, x, w, b, bias):
    h = gpt_ops.layer_norm(x, w, b)
    p = gpt_ops.causal_softmax(h @ h.transpose(-2, -1), 0.125)
    return gpt_ops.example_ops.fused_bias_gelu(p @ h, bias)


def block_inputs():
    x = torch.randn(2, 16, 64, device="cuda", requires_grad=True)
    w, b = torch.randn(64, device="cuda", requires_grad=True), torch.randn(64, device="cuda", requires_grad=True)
    bias = torch.randn(64, device="cuda", requires_grad=True)
    return (x, w, b, bias), torch.randn(2, 16, 64, device="cuda")


def test_torch_compile_fullgraph_block(gpt_ops):
    params, grad_y = block_inputs()
    y_ref = block_step(gpt_ops, *params)
    grads_ref = torch.autograd.grad(y_ref, params, grad_y)
    compiled = torch.compile(lambda *p: block_step(gpt_ops, *p), fullgraph=True)
    y = compiled(*params)
    torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-4)
    for g, g_ref in zip(torch.autograd.grad(y, params, grad_y), grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-4)


def test_side_stream_block(gpt_ops):
    params, grad_y = block_inputs()
    y_ref = block_step(gpt_ops, *params)
    grads_ref = torch.autograd.grad(y_ref, params, grad_y)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y_side = block_step(gpt_ops, *params)
        grads_side = torch.autograd.grad(y_side, params, grad_y)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    torch.testing.assert_close(y_side, y_ref, rtol=1e-5, atol=1e-5)   # cuBLAS may pick other algorithms per stream
    for g, g_ref in zip(grads_side, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-4)


def test_cuda_graph_block(gpt_ops):
    params, grad_y = block_inputs()

    def step():
        return torch.autograd.grad(block_step(gpt_ops, *params), params, grad_y)

    warm_up_on_side_stream(step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_grads = step()
    with torch.no_grad():
        for p in params:
            p.copy_(torch.randn_like(p))
        grad_y.copy_(torch.randn_like(grad_y))
    graph.replay()
    torch.cuda.synchronize()
    for g, g_new in zip(static_grads, step()):
        torch.testing.assert_close(g, g_new, rtol=1e-4, atol=1e-4)


def test_gpt_example_loss_curve_matches_eager():
    out = subprocess.run([sys.executable, str(EXAMPLES / "gpt.py"), "--steps", "80", "--sizes", "none"],
                         capture_output=True, text=True, timeout=600, env=subprocess_env())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "gpt: ok" in out.stdout and "largest difference" in out.stdout, out.stdout
