"""jitbridge.torch on the GPU: the example ops (examples/torch/ops.py) against eager PyTorch, gradcheck, opcheck,
torch.compile(fullgraph=True), CUDA graph capture and replay, a non-default stream, the error cases, the
jitbridge.torch.function variant, and the examples and the notebook run end to end.

Inputs are fresh random data (never zeros); outputs come from torch's caching allocator, which is first filled
with NaN (poison_allocator) so that an element an op forgets to write shows up."""
import base64
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import jitbridge

pytestmark = [pytest.mark.gpu]
torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import jitbridge.torch as jt  # noqa: E402
from jitbridge.torch import Launch, Output  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "torch"
NOTEBOOK_DIR = ROOT / "examples" / "notebook"
NO_AUTOGRAD_CHECK = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def load_example_ops():
    """examples/torch/ops.py imported as the module ``ops`` (as the examples import it), once per process: its ops
    register names with torch.library, which a second import would clash with (gpt_ops.py imports it too)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module("ops")


@pytest.fixture(scope="module")
def ops():
    return load_example_ops()


def poison_allocator(nbytes=64 << 20):
    """Hands torch's caching allocator a NaN-filled free block: outputs allocated next likely reuse it."""
    junk = torch.full((nbytes // 4,), float("nan"), device="cuda")
    del junk


def gelu_reference(x, bias):
    return F.gelu(x + bias, approximate="tanh")


def tolerances(dtype):
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-10, "atol": 1e-10}


def make_bias(cols, dtype, offset):
    """A bias that starts ``offset`` elements into its storage (offset 1: not 16-byte aligned)."""
    return torch.randn(cols + offset, device="cuda", dtype=dtype)[offset:].detach().requires_grad_()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, bias_offset, strided", [
    ((512, 1024), 0, False),     # 16-byte vector path
    ((37, 5), 0, False),         # scalar path: C % 4 != 0
    ((4, 3, 130), 0, False),     # more than two dimensions
    ((64, 256), 1, False),       # misaligned bias: scalar path
    ((64, 256), 0, True),        # non-contiguous x: made contiguous first
    ((40003, 64), 0, False),     # over 528 * 64 rows: 528 row blocks, each every 528th row, an odd row left
    ((34000, 5), 0, False),      # the same on the scalar path
])
def test_fused_bias_gelu_matches_eager(ops, dtype, shape, bias_offset, strided):
    dtype = getattr(torch, dtype)
    if strided:
        x = torch.randn(shape[0], 2 * shape[1], device="cuda", dtype=dtype)[:, ::2].detach().requires_grad_()
        assert not x.is_contiguous()
    else:
        x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    bias = make_bias(shape[-1], dtype, bias_offset)
    grad_y = torch.randn(shape, device="cuda", dtype=dtype)
    poison_allocator()
    y = ops.fused_bias_gelu(x, bias)
    grad_x, grad_bias = torch.autograd.grad(y, (x, bias), grad_y)
    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
    y_ref = gelu_reference(x, bias)
    grad_x_ref, grad_bias_ref = torch.autograd.grad(y_ref, (x, bias), grad_y)
    torch.testing.assert_close(y, y_ref, **tolerances(dtype))
    torch.testing.assert_close(grad_x, grad_x_ref, **tolerances(dtype))
    torch.testing.assert_close(grad_bias, grad_bias_ref, rtol=1e-4, atol=1e-4)


def test_fused_bias_gelu_grad_bias_is_deterministic(ops):
    x = torch.randn(4096, 768, device="cuda", requires_grad=True)
    bias = torch.randn(768, device="cuda", requires_grad=True)
    grad_y = torch.randn_like(x)
    y = ops.fused_bias_gelu(x, bias)
    first = torch.autograd.grad(y, bias, grad_y, retain_graph=True)[0]
    for _ in range(3):
        assert torch.equal(torch.autograd.grad(y, bias, grad_y, retain_graph=True)[0], first)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(64, 10), (33, 256), (8, 3000), (5, 1)])
def test_row_softmax_matches_torch(ops, dtype, shape):
    dtype = getattr(torch, dtype)
    x = (3 * torch.randn(shape, device="cuda", dtype=dtype)).requires_grad_()
    grad_y = torch.randn(shape, device="cuda", dtype=dtype)
    poison_allocator()
    y = ops.row_softmax(x)
    (grad_x,) = torch.autograd.grad(y, x, grad_y)
    y_ref = torch.softmax(x, dim=1)
    (grad_x_ref,) = torch.autograd.grad(y_ref, x, grad_y)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(grad_x, grad_x_ref)


def test_empty_inputs_launch_nothing_and_give_zero_gradients(ops):
    x = torch.randn(2, 0, 8, device="cuda", requires_grad=True)
    bias = torch.randn(8, device="cuda", requires_grad=True)
    y = ops.fused_bias_gelu(x, bias)
    grad_x, grad_bias = torch.autograd.grad(y, (x, bias), torch.randn_like(y))
    assert y.shape == (2, 0, 8) and grad_x.shape == (2, 0, 8)
    assert torch.equal(grad_bias, torch.zeros_like(bias))
    assert ops.row_softmax(torch.randn(0, 5, device="cuda")).shape == (0, 5)


def test_gradcheck_both_ops(ops):
    double = {"device": "cuda", "dtype": torch.float64, "requires_grad": True}
    for rows, cols in ((5, 6), (3, 7)):          # double2 vector path, scalar path
        x, bias = torch.randn(rows, cols, **double), torch.randn(cols, **double)
        assert torch.autograd.gradcheck(ops.fused_bias_gelu, (x, bias))
    assert torch.autograd.gradcheck(ops.row_softmax, (torch.randn(4, 9, **double),))


def test_opcheck_both_ops_and_their_backward_ops(ops):
    x = torch.randn(16, 32, device="cuda", requires_grad=True)
    bias = torch.randn(32, device="cuda", requires_grad=True)
    torch.library.opcheck(ops.fused_bias_gelu, (x, bias))
    xs = torch.randn(8, 40, device="cuda", requires_grad=True)
    torch.library.opcheck(ops.row_softmax, (xs,))
    backward_ops = torch.ops.jitbridge_examples
    grad_y = torch.randn(16, 32, device="cuda")
    torch.library.opcheck(backward_ops.fused_bias_gelu_backward.default, (x.detach(), bias.detach(), grad_y),
                          test_utils=NO_AUTOGRAD_CHECK)
    y = ops.row_softmax(xs).detach()
    torch.library.opcheck(backward_ops.row_softmax_backward.default, (y, torch.randn_like(y)),
                          test_utils=NO_AUTOGRAD_CHECK)


def test_torch_compile_fullgraph_forward_and_backward(ops):
    def model(x, bias):
        return ops.row_softmax(ops.fused_bias_gelu(x, bias) * 2.0)

    compiled = torch.compile(model, fullgraph=True)
    for rows in (64, 48):       # the second shape runs the fake implementations with symbolic sizes
        x = torch.randn(rows, 128, device="cuda", requires_grad=True)
        bias = torch.randn(128, device="cuda", requires_grad=True)
        grad_y = torch.randn(rows, 128, device="cuda")
        y = compiled(x, bias)
        grads = torch.autograd.grad(y, (x, bias), grad_y)
        y_ref = model(x, bias)
        grads_ref = torch.autograd.grad(y_ref, (x, bias), grad_y)
        torch.testing.assert_close(y, y_ref)
        torch.testing.assert_close(grads[0], grads_ref[0])
        torch.testing.assert_close(grads[1], grads_ref[1], rtol=1e-4, atol=1e-4)


def warm_up_on_side_stream(fn, times=3):
    """What torch.cuda.graph wants before capture: a few runs on a side stream (modules loaded, pools warm)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(times):
            fn()
    torch.cuda.current_stream().wait_stream(side)


def test_cuda_graph_capture_and_replay_forward(ops):
    x = torch.randn(256, 512, device="cuda")
    bias = torch.randn(512, device="cuda")

    def forward():
        return ops.row_softmax(ops.fused_bias_gelu(x, bias))

    warm_up_on_side_stream(forward)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = forward()
    for _ in range(2):
        x.copy_(torch.randn_like(x))         # new data in the captured input
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, torch.softmax(gelu_reference(x, bias), dim=1))


def test_cuda_graph_capture_and_replay_forward_and_backward(ops):
    x = torch.randn(128, 256, device="cuda", requires_grad=True)
    bias = torch.randn(256, device="cuda", requires_grad=True)
    grad_y = torch.randn(128, 256, device="cuda")

    def step():
        return torch.autograd.grad(ops.fused_bias_gelu(x, bias), (x, bias), grad_y)

    warm_up_on_side_stream(step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grad_x, grad_bias = step()
    with torch.no_grad():
        x.copy_(torch.randn_like(x))
        grad_y.copy_(torch.randn_like(grad_y))
    graph.replay()
    torch.cuda.synchronize()
    ref = torch.autograd.grad(gelu_reference(x, bias), (x, bias), grad_y)
    torch.testing.assert_close(grad_x, ref[0])
    torch.testing.assert_close(grad_bias, ref[1], rtol=1e-4, atol=1e-4)


def test_launches_follow_torch_current_stream(ops):
    x = torch.randn(1024, 1024, device="cuda")
    bias = torch.randn(1024, device="cuda")
    grad_y = torch.randn(1024, 1024, device="cuda")
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(100_000_000)           # the stream is busy for a while...
        xs = (x * 2).requires_grad_()            # ...and only then writes xs
        y = ops.fused_bias_gelu(xs, bias)        # queued on the stream, behind both
        (grad_x,) = torch.autograd.grad(y, xs, grad_y)
        z = ops.row_softmax(y.detach())
    stream.synchronize()                         # this stream only: no device-wide sync
    expected = gelu_reference(2 * x, bias)
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(z, torch.softmax(expected, dim=1))
    ref_x = (2 * x).requires_grad_()
    torch.testing.assert_close(grad_x, torch.autograd.grad(gelu_reference(ref_x, bias), ref_x, grad_y)[0])


class Counting:
    """A kernel that counts its launches and forwards them (same signature and name)."""

    def __init__(self, kernel, calls):
        self.kernel, self.calls = kernel, calls
        self.signature, self.name = kernel.signature, kernel.name

    def __call__(self, *args, **kwargs):
        self.calls.append(self.name)
        return self.kernel(*args, **kwargs)


def counted(declaration, calls):
    """The declaration with every kernel wrapped in Counting."""
    def wrap(launches):
        launches = [launches] if isinstance(launches, Launch) else list(launches)
        return [Launch({d: Counting(k, calls) for d, k in launch.kernels.items()}, args=launch.args,
                       grid=launch.grid, block=launch.block, shared_mem=launch.shared_mem) for launch in launches]
    return dict(declaration, forward=wrap(declaration["forward"]), backward=wrap(declaration["backward"]))


def test_bad_inputs_raise_before_any_launch(ops):
    calls = []
    op = jt.custom_op("jitbridge_tests::counted_bias_gelu", **counted(ops.BIAS_GELU, calls))
    function = jt.function(name="counted_bias_gelu", **counted(ops.BIAS_GELU, calls))
    x = torch.randn(8, 16, device="cuda")
    bias = torch.randn(16, device="cuda")
    cases = [
        ((x.cpu(), bias), ValueError, "x is a cpu tensor; this op's kernels run on CUDA tensors"),
        ((x, bias.cpu()), ValueError, "bias is a cpu tensor"),
        ((x.int(), bias), TypeError, "x has dtype int32; the kernels are declared for float32, float64"),
        ((x.half(), bias.half()), TypeError, "x has dtype float16; the kernels are declared for float32, float64"),
        ((x, bias.double()), TypeError, "bias has dtype float64, expected float32"),
        ((x, torch.randn(15, device="cuda")), ValueError, r"bias must have shape \[C\] for x of shape \[..., C\]"),
        ((x, torch.randn(2, 16, device="cuda")), ValueError, "bias must have shape"),
    ]
    for fn, name in ((op, "jitbridge_tests::counted_bias_gelu"), (function, "counted_bias_gelu")):
        for args, error, message in cases:
            with pytest.raises(error, match=message) as info:
                fn(*args)
            assert f"{name}: " in str(info.value)
    assert calls == []
    op(x, bias)
    function(x=x, bias=bias)
    torch.cuda.synchronize()
    assert calls == ["bias_gelu_fwd<float>"] * 2
    with pytest.raises(ValueError, match="jitbridge_examples::row_softmax: x must be 2-D"):
        ops.row_softmax(torch.randn(2, 3, 4, device="cuda"))
    with pytest.raises(ValueError, match="jitbridge_examples::fused_bias_gelu: x is a cpu tensor"):
        ops.fused_bias_gelu(x.cpu(), bias.cpu())


SCALE_SOURCE = r'''
extern "C" __global__ void scale_fwd(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = FACTOR * x[i];
}
extern "C" __global__ void scale_bwd(const float* gy, float* gx, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) gx[i] = FACTOR * gy[i];
}
'''


def scale_declaration(factor, backward=True):
    m = jitbridge.RawModule(code=SCALE_SOURCE, options=(f"-DFACTOR={factor}.0f",))
    grid = lambda x: (x.numel() + 255) // 256  # noqa: E731
    declaration = dict(inputs=("x",), outputs={"y": Output(like="x")},
                       forward=Launch(m.get_function("scale_fwd"), args=("x", "y", jt.numel("x")), grid=grid,
                                      block=256))
    if backward:
        declaration.update(grads={"x": Output(like="grad_y")},
                           backward=Launch(m.get_function("scale_bwd"), args=("grad_y", "grad_x", jt.numel("grad_y")),
                                           grid=lambda grad_y: (grad_y.numel() + 255) // 256, block=256))
    return declaration


def test_declaring_an_op_again_replaces_its_kernels(ops):
    """A notebook cell declaring an op, edited and run again: the op (and every handle to it, compiled graphs
    included) runs the new kernels, forward and backward; the schema must stay."""
    first = jt.custom_op("jitbridge_tests::rescale", **scale_declaration(2))
    x = torch.randn(1000, device="cuda", requires_grad=True)
    grad_y = torch.randn(1000, device="cuda")
    compiled = torch.compile(lambda t: first(t) + 1, fullgraph=True)
    torch.testing.assert_close(first(x), 2 * x)
    torch.testing.assert_close(compiled(x), 2 * x + 1)
    second = jt.custom_op("jitbridge_tests::rescale", **scale_declaration(3))
    assert second is first
    for op in (first, torch.ops.jitbridge_tests.rescale.default, torch.ops.jitbridge_tests.rescale):
        y = op(x)
        torch.testing.assert_close(y, 3 * x)
        (g,) = torch.autograd.grad(y, x, grad_y)
        torch.testing.assert_close(g, 3 * grad_y)
    torch.testing.assert_close(compiled(x), 3 * x + 1)
    torch.library.opcheck(second, (torch.randn(64, device="cuda", requires_grad=True),))
    with pytest.raises(jt.OpDeclarationError, match="must keep its schema"):
        jt.custom_op("jitbridge_tests::rescale", **scale_declaration(4, backward=False))
    bad = scale_declaration(5)
    bad["inputs"] = ("x", "alpha: float")
    with pytest.raises(jt.OpDeclarationError, match="must keep its schema"):
        jt.custom_op("jitbridge_tests::rescale", **bad)
    torch.testing.assert_close(first(x), 3 * x)       # a refused re-declaration leaves the op as it was


def test_declaring_a_name_registered_by_other_code_is_a_declaration_error(ops):
    torch.library.define("jitbridge_tests::taken", "(Tensor x) -> Tensor")
    with pytest.raises(jt.OpDeclarationError, match="already registered in this process by other code"):
        jt.custom_op("jitbridge_tests::taken", **scale_declaration(2))
    jt.function(name="taken", **scale_declaration(2))  # an unregistered op: no name clash


def test_function_variant_gives_the_same_results_and_gradients(ops):
    fused = jt.function(name="fused_bias_gelu (function)", **ops.BIAS_GELU)
    softmax = jt.function(name="row_softmax (function)", **ops.ROW_SOFTMAX)
    x = torch.randn(300, 96, device="cuda", requires_grad=True)
    bias = torch.randn(96, device="cuda", requires_grad=True)
    grad_y = torch.randn(300, 96, device="cuda")
    for a, b in ((fused, ops.fused_bias_gelu), (lambda x, bias: softmax(fused(x, bias=bias)),
                                                lambda x, bias: ops.row_softmax(ops.fused_bias_gelu(x, bias)))):
        y, y_op = a(x, bias), b(x, bias)
        torch.testing.assert_close(y, y_op, rtol=0, atol=0)
        grads = torch.autograd.grad(y, (x, bias), grad_y)
        grads_op = torch.autograd.grad(y_op, (x, bias), grad_y)
        for g, g_op in zip(grads, grads_op):
            torch.testing.assert_close(g, g_op, rtol=0, atol=0)
    double = {"device": "cuda", "dtype": torch.float64, "requires_grad": True}
    assert torch.autograd.gradcheck(fused, (torch.randn(4, 6, **double), torch.randn(6, **double)))
    assert torch.autograd.gradcheck(softmax, (torch.randn(3, 11, **double),))


def subprocess_env():
    env = dict(os.environ)
    package_parent = str(Path(jitbridge.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


# gpt.py: test_torch_training_gpu; ddp.py (2 processes under torchrun): test_torch_ddp_gpu
@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.py") if p.name not in ("gpt.py", "ddp.py")))
def test_examples_run(gpu, example):
    out = subprocess.run([sys.executable, str(EXAMPLES / example)], capture_output=True, text=True, timeout=900,
                         env=subprocess_env())
    assert out.returncode == 0, out.stdout + out.stderr
    assert ": ok" in out.stdout, out.stdout


def load_notebook_runner():
    spec = importlib.util.spec_from_file_location("jitbridge_run_notebook_gpu", NOTEBOOK_DIR / "run_notebook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_and_record_notebook(name, tmp_path):
    """Runs examples/notebook/NAME with run_notebook.py --write-outputs; returns (console output, the notebook with
    its recorded outputs). With JITBRIDGE_NOTEBOOK_OUTPUTS=DIR the notebook is written to DIR/NAME (to be committed
    as examples/notebook/NAME), else under tmp_path. Checks what every recorded notebook must have: outputs that
    match its code (the CI check), an output for every code cell, a jitbridge.benchmark table and, with matplotlib
    installed, a plot."""
    out_dir = Path(os.environ.get("JITBRIDGE_NOTEBOOK_OUTPUTS") or tmp_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / name
    proc = subprocess.run([sys.executable, str(NOTEBOOK_DIR / "run_notebook.py"), str(NOTEBOOK_DIR / name),
                           "--write-outputs", str(out)], capture_output=True, text=True, timeout=600,
                          env=subprocess_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"run_notebook: {name}: ok" in proc.stdout and f"{name.split('.')[0]}: ok" in proc.stdout
    notebook = json.loads(out.read_text())
    runner = load_notebook_runner()
    assert runner.sync_problems(notebook) == []
    cells = runner.code_cells(notebook)
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1))
    assert all(c["outputs"] for c in cells), [n for n, c in enumerate(cells, 1) if not c["outputs"]]
    outputs = [o for c in cells for o in c["outputs"]]
    html = [text_of(o["data"]["text/html"]) for o in outputs if "text/html" in o.get("data", {})]
    assert any('<table class="jitbridge-benchmark">' in h and "GB/s" in h for h in html), html
    if importlib.util.find_spec("matplotlib") is not None:
        pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
        assert pngs and all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    first = "".join(text_of(o["text"]) for o in cells[0]["outputs"] if o["output_type"] == "stream")
    assert "jitbridge " in first and torch.cuda.get_device_name() in first     # which machine made the numbers
    return proc.stdout, notebook, outputs


def text_of(value):
    return "".join(value) if isinstance(value, list) else value


def test_notebook_runs_end_to_end(gpu, tmp_path):
    out, notebook, outputs = run_and_record_notebook("prototype_kernel.ipynb", tmp_path)
    assert "CompileError: swish_beta.cu:3:" in out and "expf(-beta * x[i])" in out
    assert "from the memory cache" in out
    (error,) = [o for o in outputs if o["output_type"] == "error"]
    assert error["ename"] == "CompileError" and error["evalue"].startswith("swish_beta.cu:3:")
    lines = error["traceback"]
    source = next(i for i, line in enumerate(lines) if line.endswith("expf(-beta * x[i]));") and "|" in line)
    assert lines[source + 1].rstrip().endswith("^") and lines[source + 1].index("^") == lines[source].index("beta")
    assert any("<b>CompileError</b>" in text_of(o["data"].get("text/html", "")) for o in outputs
               if o["output_type"] == "display_data")
    streams = "".join(text_of(o["text"]) for o in outputs if o["output_type"] == "stream")
    assert "swish matches x * sigmoid(x)" in streams and "from the memory cache" in streams
    assert "GB/s" in streams   # the size sweep's table


def test_autograd_notebook_runs_end_to_end(gpu, tmp_path):
    out, notebook, outputs = run_and_record_notebook("autograd_op.ipynb", tmp_path)
    streams = "".join(text_of(o["text"]) for o in outputs if o["output_type"] == "stream")
    assert "gradcheck, float64, beta = 1.702: True" in streams and "gradcheck, float64, beta = -0.5:  True" in streams
    assert "opcheck: ok" in streams and "swish_fwd<double>(double const*, double*, double, long long)" in streams
    assert "jitbridge op: loss" in streams and "eager: loss" in streams
    (error,) = [o for o in outputs if o["output_type"] == "error"]
    assert error["ename"] == "OpDeclarationError" and "args= has 4 entries" in error["evalue"]
    results = [text_of(o["data"]["text/plain"]) for o in outputs if o["output_type"] == "execute_result"]
    assert any("notebook.swish_1" in r for r in results), results
