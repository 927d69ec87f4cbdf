"""jitbridge.torch's native runner on the GPU (torch_native/addon.cpp: dispatcher kernels and a C++ autograd node):
forward and backward against eager PyTorch and against the same declaration on the Python runner, gradcheck in
float64, opcheck, torch.compile(fullgraph=True), CUDA graphs, a side stream, retain_graph, double backward refused,
saved tensors modified in place, bad inputs, re-declaration, and the fallbacks to the Python runner.

The add-on is built at first use (JITBRIDGE_TORCH_NATIVE=1 here: a build failure fails the tests instead of falling
back). Inputs are fresh random data; outputs come from torch's caching allocator after it was filled with NaN."""
import os

import pytest

import jitbridge

pytestmark = [pytest.mark.gpu]
torch = pytest.importorskip("torch")

import jitbridge.torch as jt  # noqa: E402
from jitbridge.torch import Launch, Output, numel  # noqa: E402

SRC = r'''
// y = x * w + alpha, z = x - w (two outputs); the backward takes both incoming gradients.
template <class T> __global__ void fwd(const T* x, const T* w, T* y, T* z, T alpha, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { y[i] = x[i] * w[i] + alpha; z[i] = x[i] - w[i]; }
}
template <class T> __global__ void bwd(const T* x, const T* w, const T* gy, const T* gz, T* gx, T* gw, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { gx[i] = gy[i] * w[i] + gz[i]; gw[i] = gy[i] * x[i] - gz[i]; }
}
'''


@pytest.fixture(scope="module")
def module():
    return jitbridge.RawModule(code=SRC, name_expressions=[f"{k}<{t}>" for k in ("fwd", "bwd")
                                                           for t in ("float", "double")])


def declaration(module, block=256):
    def per_dtype(k):
        return {"float32": module.get_function(f"{k}<float>"), "float64": module.get_function(f"{k}<double>")}
    return dict(inputs=("x", "w", "alpha: float"), outputs={"y": Output(like="x"), "z": Output(like="x")},
                forward=Launch(per_dtype("fwd"), args=("x", "w", "y", "z", "alpha", numel("x")),
                               grid=lambda x: jt.cdiv(x.numel(), block), block=block),
                save=("x", "w"),
                backward=Launch(per_dtype("bwd"), args=("x", "w", "grad_y", "grad_z", "grad_x", "grad_w",
                                                        numel("x")),
                                grid=lambda x: (x.numel() + block - 1) // block, block=block),
                grads={"x": Output(like="x"), "w": Output(like="w")})


def declare(name, decl, native):
    with pytest.MonkeyPatch.context() as mp:  # also from the module-scoped fixture below
        mp.setenv("JITBRIDGE_TORCH_NATIVE", "1" if native else "0")
        return jt.custom_op(name, **decl)


@pytest.fixture(scope="module")
def ops(module):
    native = declare("jitbridge_native_tests::mul_add", declaration(module), native=True)
    python = declare("jitbridge_native_tests::mul_add_py", declaration(module), native=False)
    return native, python


def poison_allocator(nbytes=64 << 20):
    junk = torch.full((nbytes // 4,), float("nan"), device="cuda")
    del junk


def reference(x, w, alpha):
    return x * w + alpha, x - w


def inputs(shape, dtype, strided=False):
    if strided:
        x = torch.randn(shape[0], 2 * shape[1], device="cuda", dtype=dtype)[:, ::2]
        assert not x.is_contiguous()
    else:
        x = torch.randn(shape, device="cuda", dtype=dtype)
    w = torch.randn(shape, device="cuda", dtype=dtype)
    return x.detach().requires_grad_(), w.requires_grad_()


def test_runner_property_says_native_and_why(ops):
    native, python = ops
    r = jt.runner(native)
    assert r.kind == "native" and "add-on" in r.reason and "native" in repr(r)
    assert jt.runner(python).kind == "python" and "JITBRIDGE_TORCH_NATIVE=0" in jt.runner(python).reason
    assert jt.runner("jitbridge_native_tests::mul_add") is r


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape, strided", [((1000,), False), ((37, 129), False), ((64, 256), True)])
def test_forward_backward_match_eager_and_the_python_runner(ops, dtype, shape, strided):
    native, python = ops
    x, w = inputs(shape, dtype, strided)
    gy, gz = torch.randn_like(x), torch.randn_like(x)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    results = {}
    for name, fn in (("native", native), ("python", python), ("eager", reference)):
        poison_allocator()
        y, z = fn(x, w, 0.5)
        gx, gw = torch.autograd.grad((y, z), (x, w), (gy, gz))
        results[name] = (y, z, gx, gw)
    for name in ("native", "python"):
        for got, want in zip(results[name], results["eager"]):
            torch.testing.assert_close(got, want, **tol)
    assert results["native"][0].grad_fn.name() == "jitbridge_native_tests::mul_add_jitbridge_backward"


def test_an_output_without_gradient_gets_zeros(ops):
    native, _ = ops
    x, w = inputs((300,), torch.float64)
    poison_allocator()
    y, z = native(x, w, 2.0)
    gx, gw = torch.autograd.grad(y.sum(), (x, w))  # z takes no part: its gradient is zeros
    torch.testing.assert_close(gx, w.detach())
    torch.testing.assert_close(gw, x.detach())


def test_gradcheck_float64(ops):
    native, _ = ops
    x, w = inputs((17, 5), torch.float64)
    assert torch.autograd.gradcheck(lambda x, w: native(x, w, 0.25), (x, w))


def test_opcheck(ops):
    native, _ = ops
    x, w = inputs((8, 33), torch.float32)
    torch.library.opcheck(native, (x, w, 1.5))


def test_torch_compile_fullgraph(ops):
    native, _ = ops

    def model(x, w):
        y, z = native(x, w, 0.75)
        return (y * z).sum()

    compiled = torch.compile(model, fullgraph=True)
    x, w = inputs((64, 65), torch.float32)
    want = model(x, w)
    gx_want, gw_want = torch.autograd.grad(want, (x, w))
    got = compiled(x, w)
    gx, gw = torch.autograd.grad(got, (x, w))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(gx, gx_want)
    torch.testing.assert_close(gw, gw_want)


def test_cuda_graph_capture_and_replay(ops):
    native, _ = ops
    x = torch.randn(4096, device="cuda")
    w = torch.randn(4096, device="cuda")
    native(x, w, 1.0)  # resolve the kernels before capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            y, z = native(x, w, 1.0)
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        w.copy_(torch.randn_like(w))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, x * w + 1.0)
        torch.testing.assert_close(z, x - w)


def test_side_stream(ops):
    native, _ = ops
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x, w = inputs((1 << 20,), torch.float32)
        y, z = native(x, w, 3.0)
        gx, gw = torch.autograd.grad(y.sum(), (x, w))
    stream.synchronize()
    torch.testing.assert_close(y, x * w + 3.0)
    torch.testing.assert_close(gx, w.detach())


def test_retain_graph_and_backward_twice(ops):
    native, _ = ops
    x, w = inputs((100,), torch.float64)
    y, z = native(x, w, 0.0)
    loss = (y + z).sum()
    g1 = torch.autograd.grad(loss, (x, w), retain_graph=True)
    g2 = torch.autograd.grad(loss, (x, w))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(loss, (x, w))


def test_double_backward_is_refused(ops):
    native, _ = ops
    x, w = inputs((10,), torch.float64)
    y, _ = native(x, w, 0.0)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(y.sum(), (x, w), create_graph=True)


def test_saved_tensor_modified_in_place_is_detected(ops):
    native, _ = ops
    x, w = inputs((10,), torch.float32)
    w2 = w * 1  # a non-leaf saved by the op
    y, _ = native(x, w2, 0.0)
    with torch.no_grad():
        w2.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_bad_inputs_raise_before_launching(ops):
    native, _ = ops
    x = torch.randn(10, device="cuda")
    with pytest.raises(ValueError, match="cpu tensor; this op's kernels run on CUDA tensors"):
        native(torch.randn(10), torch.randn(10), 1.0)
    with pytest.raises(TypeError, match="declared for float32, float64"):
        native(x.half(), x.half(), 1.0)
    with pytest.raises(TypeError, match="expected"):
        native(x, x.double(), 1.0)


def test_dtype_decisions_follow_each_call_and_each_redeclaration(module):
    # The add-on decides per phase and dtype when a declaration is registered (allowed dtypes, dtype rules, the
    # kernel of each launch): calls alternating dtypes, then re-declarations narrowing the kernels, must each get the
    # decision of their own dtype and of the current declaration.
    name = "jitbridge_native_tests::dtype_tables"
    op = declare(name, declaration(module), native=True)
    for dtype in (torch.float64, torch.float32, torch.float64, torch.float32):
        x, w = inputs((1000,), dtype)
        poison_allocator()
        y, z = op(x, w, 0.5)
        gy, gz = torch.randn_like(y), torch.randn_like(z)
        gx, gw = torch.autograd.grad((y, z), (x, w), (gy, gz))
        assert y.dtype == gx.dtype == dtype
        torch.testing.assert_close((y, z), reference(x.detach(), w.detach(), 0.5))
        torch.testing.assert_close((gx, gw), (gy * w.detach() + gz, gy * x.detach() - gz))
    x = torch.randn(10, device="cuda")
    with pytest.raises(TypeError, match=r"x has dtype float16; the kernels are declared for float32, float64"):
        op(x.half(), x.half(), 1.0)
    with pytest.raises(TypeError, match=r"w has dtype float64, expected float32 \(with x of dtype float32\)"):
        op(x, x.double(), 1.0)
    with pytest.raises(TypeError, match=r"w has dtype float32, expected float64 \(with x of dtype float64\)"):
        op(x.double(), x, 1.0)
    narrowed = declaration(module)  # the same op with float64 kernels only
    for phase in ("forward", "backward"):
        launch = narrowed[phase]
        narrowed[phase] = Launch({"float64": launch.kernels["float64"]}, args=launch.args, grid=launch.grid,
                                 block=launch.block)
    declare(name, narrowed, native=True)
    with pytest.raises(TypeError, match=r"x has dtype float32; the kernels are declared for float64"):
        op(x, x, 1.0)
    x, w = inputs((1000,), torch.float64)
    torch.testing.assert_close(op(x, w, 2.0), reference(x.detach(), w.detach(), 2.0))
    declare(name, declaration(module), native=True)  # and back: float32 runs again
    x, w = inputs((1000,), torch.float32)
    torch.testing.assert_close(op(x, w, 3.0), reference(x.detach(), w.detach(), 3.0))


def test_empty_input_launches_nothing(ops):
    native, _ = ops
    x = torch.randn(0, device="cuda", requires_grad=True)
    y, z = native(x, x, 1.0)
    assert y.shape == (0,) and z.shape == (0,)
    gx, = torch.autograd.grad(y.sum(), x)
    assert gx.shape == (0,)


def test_redeclaring_swaps_the_kernels_under_every_handle(module):
    name = "jitbridge_native_tests::redeclared"
    first = declare(name, declaration(module, block=128), native=True)
    x, w = inputs((999,), torch.float32)
    torch.testing.assert_close(first(x, w, 1.0)[0], x * w + 1.0)
    # the same schema with a rule that needs Python: refused, the op keeps working
    bad = declaration(module)
    bad["forward"] = Launch(bad["forward"].kernels, args=bad["forward"].args, grid=lambda x: max(1, x.numel()),
                            block=256)
    with pytest.raises(jt.OpDeclarationError, match="native runner"):
        declare(name, bad, native=True)
    second = declare(name, declaration(module, block=64), native=True)
    assert second is first or second == first
    torch.testing.assert_close(first(x, w, 2.0)[0], x * w + 2.0)


def test_python_rules_fall_back_with_the_reason(module):
    decl = declaration(module)
    decl["forward"] = Launch(decl["forward"].kernels, args=decl["forward"].args,
                             grid=lambda x: max(1, (x.numel() + 255) // 256), block=256)
    op = declare("jitbridge_native_tests::python_rule", decl, native=True)
    r = jt.runner(op)
    assert r.kind == "python" and "branch or conversion" in r.reason
    x, w = inputs((77,), torch.float64)
    y, z = op(x, w, 1.0)
    torch.testing.assert_close(y, x * w + 1.0)


def test_cpu_tensors_after_gpu_work_on_both_runners_raise(tmp_path):
    """Issue 26's crash (SIGSEGV when the example op, native, got CPU tensors late in the GPU suite, in a process
    with ops on both runners), as one process: examples/torch/ops.py declared on both runners, the GPU work the
    suite does before (forward and backward, gradcheck, opcheck of the ops and their _backward ops,
    torch.compile(fullgraph=True), CUDA graph capture of forward and backward), then CPU, mixed and meta inputs into
    every op. In a subprocess with faulthandler, so a crash fails this test with the native stack's Python frames."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    script = textwrap.dedent(f'''
        import os, sys
        import torch, jitbridge.torch as jt
        def declare(native, namespace):
            os.environ["JITBRIDGE_TORCH_NATIVE"] = "1" if native else "0"
            text = open({str(root / "examples" / "torch" / "ops.py")!r}).read()
            module = type(sys)(namespace)
            exec(compile(text.replace("jitbridge_examples::", namespace + "::"), namespace, "exec"), module.__dict__)
            return module
        both = [declare(True, "jb_crash_native"), declare(False, "jb_crash_python")]
        print([jt.runner(m.fused_bias_gelu).kind for m in both])
        for m in both:
            x = torch.randn(64, 128, device="cuda", requires_grad=True)
            b = torch.randn(128, device="cuda", requires_grad=True)
            torch.autograd.grad(m.row_softmax(m.fused_bias_gelu(x, b)).sum(), (x, b))
            d = dict(device="cuda", dtype=torch.float64, requires_grad=True)
            assert torch.autograd.gradcheck(m.fused_bias_gelu, (torch.randn(3, 7, **d), torch.randn(7, **d)))
            torch.library.opcheck(m.fused_bias_gelu, (x, b))
            packet = getattr(torch.ops, m.__name__)
            torch.library.opcheck(packet.fused_bias_gelu_backward.default,
                                  (x.detach(), b.detach(), torch.randn_like(x)),
                                  test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
            compiled = torch.compile(lambda x, b: m.row_softmax(m.fused_bias_gelu(x, b) * 2.0), fullgraph=True)
            for rows in (64, 48):
                xr = torch.randn(rows, 128, device="cuda", requires_grad=True)
                torch.autograd.grad(compiled(xr, b).sum(), (xr, b))
            gy = torch.randn_like(x)
            step = lambda: torch.autograd.grad(m.fused_bias_gelu(x, b), (x, b), gy)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            graph.replay()
            torch.cuda.synchronize()
        xc, bc = torch.randn(8, 16, device="cuda"), torch.randn(16, device="cuda")
        for m in both:
            packet = getattr(torch.ops, m.__name__)
            cases = [(m.fused_bias_gelu, (xc.cpu(), bc.cpu())), (m.fused_bias_gelu, (xc.cpu(), bc)),
                     (m.fused_bias_gelu, (xc, bc.cpu())), (packet.fused_bias_gelu, (xc.cpu(), bc.cpu())),
                     (m.fused_bias_gelu, (xc.cpu().requires_grad_(), bc.cpu())), (m.row_softmax, (xc.cpu(),)),
                     (packet.fused_bias_gelu_backward, (xc.cpu(), bc.cpu(), xc.cpu())),
                     (m.fused_bias_gelu, (xc, torch.empty(16, device="meta")))]
            for op, args in cases:
                try:
                    op(*args)
                    print("no error")
                except ValueError as e:
                    print("ValueError", str(e).split(";")[0])
        print("end")
        ''')
    env = dict(os.environ, PYTHONFAULTHANDLER="1", PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-6000:]}"
    lines = done.stdout.splitlines()
    assert lines[0] == "['native', 'python']" and lines[-1] == "end", done.stdout
    assert len(lines) == 2 + 16 and all(l.startswith("ValueError jb_crash_") for l in lines[1:-1]), done.stdout


def test_rule_values_follow_each_calls_shapes_and_scalars(ops, monkeypatch):
    # The add-on replays a phase's rule values (output shapes, checks, grid, block, launch arguments) from its last
    # call with the same tensor sizes and scalars (PhaseMemo in plan.hpp). Calls alternating a float scalar that is a
    # launch argument, then shapes across example 1's one-row-block / several-row-blocks boundary (its scratch's
    # shape, second launch and grids follow the shape), must each get their own values: results against eager.
    native, _ = ops
    for shape, alpha in [((1000,), 0.5), ((1000,), 2.0), ((1000,), 0.5), ((37, 129), 0.5), ((1000,), -1.0)]:
        x, w = inputs(shape, torch.float64)
        gy, gz = torch.randn_like(x), torch.randn_like(x)
        poison_allocator()
        y, z = native(x, w, alpha)
        gx, gw = torch.autograd.grad((y, z), (x, w), (gy, gz))
        torch.testing.assert_close((y, z), reference(x.detach(), w.detach(), alpha), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close((gx, gw), (gy * w.detach() + gz, gy * x.detach() - gz), rtol=1e-12, atol=1e-12)
    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch", "ops.py")
    text = open(examples).read().replace("jitbridge_examples::", "jitbridge_native_memo::")
    example = type(os)("jitbridge_native_memo")
    with monkeypatch.context() as mp:  # declared on the native runner; the setting is restored before the calls
        mp.setenv("JITBRIDGE_TORCH_NATIVE", "1")
        exec(compile(text, examples, "exec"), example.__dict__)
    op = example.fused_bias_gelu
    assert jt.runner(op).kind == "native"
    for rows, cols in [(64, 256), (4096, 256), (64, 256), (300000, 8), (4096, 256), (3, 1500), (64, 256)]:
        x = torch.randn(rows, cols, device="cuda", dtype=torch.float64, requires_grad=True)
        b = torch.randn(cols, device="cuda", dtype=torch.float64, requires_grad=True)
        gy = torch.randn(rows, cols, device="cuda", dtype=torch.float64)
        want_y = torch.nn.functional.gelu(x + b, approximate="tanh")
        want = torch.autograd.grad(want_y, (x, b), gy)
        poison_allocator()
        y = op(x, b)
        got = torch.autograd.grad(y, (x, b), gy)
        torch.testing.assert_close(y, want_y, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
