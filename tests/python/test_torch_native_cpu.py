"""jitbridge.torch's two runners in one process, with torch and no GPU (issue 26's crash class): native and Python
declarations side by side, CPU, meta and mixed tensors into either (a ValueError naming the argument, never a
crash), re-declaring while an autograd graph is alive, a runner switch refused, a re-declaration changing which
inputs have gradients refused, a fresh declaration failing part-way, and descriptions the add-on must refuse (schema
drift, out-of-range slots, changed autograd wiring) instead of reading past a call's arguments. Each scenario runs
in a fresh process, so a crash fails the test with its signal instead of ending pytest. Skipped without torch; the
add-on is built at first use (JITBRIDGE_TORCH_NATIVE=1: a failed build fails these tests), into this test's cache."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = r'''
import gc, os, sys
sys.path.insert(0, {examples!r})
import torch, jitbridge, jitbridge.torch as jt

def declare_examples(native, namespace):
    """examples/torch/ops.py (fused_bias_gelu: three backward launches, scratch, a Check; row_softmax) under
    `namespace`, on the runner `native` asks for."""
    os.environ["JITBRIDGE_TORCH_NATIVE"] = "1" if native else "0"
    text = open({ops!r}).read().replace("jitbridge_examples::", namespace + "::")
    module = type(sys)(namespace)
    exec(compile(text, namespace, "exec"), module.__dict__)
    return module

def error(call):
    try:
        call()
    except Exception as e:
        return f"{{type(e).__name__}}: {{e}}".splitlines()[0]
    return "no error"

def meta(*shape):
    return torch.empty(*shape, device="meta", requires_grad=True)

def edit_descriptions(old, new):
    """Until the returned function is called, the add-on gets every op description with `old` replaced by `new`."""
    from jitbridge.torch import description
    real = description.describe
    def edited(spec):
        text, kernels = real(spec)
        return text.replace(old, new), kernels
    description.describe = edited
    return lambda: setattr(description, "describe", real)
'''


def run(body, cache, timeout=600):
    """Runs PRELUDE + body in a fresh interpreter; returns its stdout lines. Fails on any non-zero exit (a signal
    shows as a negative code)."""
    code = PRELUDE.format(examples=str(ROOT / "examples" / "torch"), ops=str(ROOT / "examples" / "torch" / "ops.py"))
    env = dict(os.environ, JITBRIDGE_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(sys.path),
               PYTHONFAULTHANDLER="1")
    env.pop("JITBRIDGE_CACHE", None)
    done = subprocess.run([sys.executable, "-c", code + textwrap.dedent(body)], capture_output=True, text=True,
                          env=env, timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout.splitlines()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache for the module: the add-on is built once (about a minute on 2 cores), then loaded."""
    return tmp_path_factory.mktemp("native-cache")


def test_cpu_and_meta_tensors_into_both_runners_raise_value_errors(cache):
    out = run('''
        native = declare_examples(True, "jb_cpu_native")
        python = declare_examples(False, "jb_cpu_python")
        print(jt.runner(native.fused_bias_gelu).kind, jt.runner(python.fused_bias_gelu).kind)
        x, b = torch.randn(8, 16), torch.randn(16)
        for m in (native, python):
            packet = getattr(torch.ops, m.__name__)
            for op in (m.fused_bias_gelu, packet.fused_bias_gelu):  # the OpOverload and its packet
                print(error(lambda: op(x, b)))
                print(error(lambda: op(x.clone().requires_grad_(), b.clone().requires_grad_())))
                print(error(lambda: op(x, torch.empty(16, device="meta"))))
            print(error(lambda: m.row_softmax(x)))
            print(error(lambda: packet.fused_bias_gelu_backward(x, b, x)))
        print("end")
        ''', cache)
    assert out[0] == "native python"
    assert out[-1] == "end"
    for line in out[1:-1]:
        assert line.startswith("ValueError: jb_cpu_"), line
        assert "is a cpu tensor; this op's kernels run on CUDA tensors" in line or "meta" in line, line


def test_redeclaring_while_a_graph_is_alive_and_switching_runners(cache):
    out = run('''
        m = declare_examples(True, "jb_cpu_redeclared")
        x, b = meta(4, 8), meta(8)
        y = m.fused_bias_gelu(x, b)                      # a graph holding the first declaration's node
        for _ in range(3):                               # a notebook cell run again
            again = jt.custom_op("jb_cpu_redeclared::fused_bias_gelu", **m.BIAS_GELU)
        print(again is m.fused_bias_gelu or again == m.fused_bias_gelu, jt.runner(again).kind)
        gc.collect()
        gx, gb = torch.autograd.grad(y.sum(), (x, b))
        print(tuple(gx.shape), tuple(gb.shape))
        del y
        gc.collect()
        os.environ["JITBRIDGE_TORCH_NATIVE"] = "0"       # the same name now asks for the Python runner: refused
        print(error(lambda: jt.custom_op("jb_cpu_redeclared::fused_bias_gelu", **m.BIAS_GELU)))
        print(jt.runner(m.fused_bias_gelu).kind)
        print(error(lambda: m.fused_bias_gelu(torch.randn(2, 8), torch.randn(8))))
        y = m.fused_bias_gelu(x, b)
        print(tuple(torch.autograd.grad(y.sum(), x)[0].shape))
        # Python first, then native asked for: the op keeps the Python runner
        p = declare_examples(False, "jb_cpu_python_first")
        os.environ["JITBRIDGE_TORCH_NATIVE"] = "1"
        jt.custom_op("jb_cpu_python_first::fused_bias_gelu", **p.BIAS_GELU)
        r = jt.runner(p.fused_bias_gelu)
        print(r.kind, "JITBRIDGE_TORCH_NATIVE" in r.reason)
        print("end")
        ''', cache)
    assert out[0] == "True native"
    assert out[1] == "(4, 8) (8,)"
    assert out[2].startswith("OpDeclarationError: jb_cpu_redeclared::fused_bias_gelu: this process declared the op "
                             "with the native runner")
    assert out[3] == "native"
    assert out[4].startswith("ValueError: jb_cpu_redeclared::fused_bias_gelu: x is a cpu tensor")
    assert out[5] == "(4, 8)"
    assert out[6] == "python True"
    assert out[-1] == "end"


def test_the_add_on_refuses_descriptions_that_do_not_fit_the_op(cache):
    out = run('''
        from jitbridge.torch import addon as native_addon, description
        from jitbridge._opspec import OpSpec
        m = declare_examples(True, "jb_cpu_refused")
        addon = native_addon.load(torch)
        spec = OpSpec("jb_cpu_refused::fused_bias_gelu", **m.BIAS_GELU)
        text, kernels = description.describe(spec)
        def refused(changed):
            try:
                addon.register(changed, kernels)
            except RuntimeError as e:
                return str(e)
            return "registered"
        print(refused(text))                                               # the same declaration: fine
        print(refused(text.replace("op jb_cpu_refused::fused_bias_gelu 2 1", "op jb_cpu_refused::fused_bias_gelu 3 1")))
        print(refused(text.replace("args T T\\n", "args T T f\\n", 1)))
        print(refused(text.replace("saved i 1", "saved i 7")))
        print(refused(text.replace("grad_inputs 0 1", "grad_inputs 0 5")))
        print(refused(text.replace("grad_inputs 0 1", "grad_inputs 1 0")))   # a re-declaration's wiring: kept
        print(refused(text.replace("names x bias grad_y", "names bias x grad_y")))
        print(refused(text.replace("dispatch 0", "dispatch 9", 1)))
        print(refused(text.replace("arg slot 2", "arg slot 99", 1)))
        print(refused(text.replace("require float64 1 float64", "require float64 9 float64", 1)))
        print(refused(text.replace("jb_cpu_refused::fused_bias_gelu", "jb_cpu_refused::never_defined")))
        x, b = meta(4, 8), meta(8)
        print(tuple(torch.autograd.grad(m.fused_bias_gelu(x, b).sum(), x)[0].shape))  # still the old kernels
        print(error(lambda: m.fused_bias_gelu(torch.randn(2, 8), torch.randn(8))))
        print("end")
        ''', cache)
    assert out[0] == "registered"
    assert "match" in out[1] or "schema" in out[1], out[1]
    assert "arguments" in out[2], out[2]
    assert "saved index is out of range" in out[3], out[3]
    assert "grad_inputs index is out of range" in out[4], out[4]
    assert out[5] == ("jb_cpu_refused::fused_bias_gelu: a re-declaration must keep which inputs have gradients (an "
                      "autograd graph recorded before gives the backward's results to the inputs it was recorded "
                      "for)"), out[5]
    assert out[6] == ("jb_cpu_refused::fused_bias_gelu: a re-declaration must keep the names of the arguments and "
                      "of what the backward takes"), out[6]
    assert "dispatch argument" in out[7], out[7]
    assert "slot is out of range" in out[8], out[8]
    assert out[9] == "jb_cpu_refused::fused_bias_gelu: forward: a dtype rule's slot is out of range", out[9]
    assert "is not defined" in out[10], out[10]
    assert out[11] == "(4, 8)"
    assert out[12].startswith("ValueError: jb_cpu_refused::fused_bias_gelu: x is a cpu tensor")
    assert out[-1] == "end"


def test_missing_gradients_under_dynamic_shapes(cache):
    """The node fills the gradient of an output autograd has none for with zeros of the output's (symbolic) shape:
    torch.compile(dynamic=True) traces the node with symbolic sizes."""
    out = run('''
        from jitbridge.torch import Launch, Output, numel
        src = """
        template <class T> __global__ void fwd(const T* x, const T* w, T* y, T* z, T alpha, long long n) {}
        template <class T> __global__ void bwd(const T* x, const T* w, const T* gy, const T* gz, T* gx, T* gw,
                                               long long n) {}
        """
        module = jitbridge.RawModule(code=src, arch="sm_90", name_expressions=["fwd<float>", "bwd<float>"])
        os.environ["JITBRIDGE_TORCH_NATIVE"] = "1"
        op = jt.custom_op(
            "jb_cpu_two::mul_add", inputs=("x", "w", "alpha: float"),
            outputs={"y": Output(like="x"), "z": Output(like="x")},
            forward=Launch({"float32": module.get_function("fwd<float>")},
                           args=("x", "w", "y", "z", "alpha", numel("x")), grid=lambda x: jt.cdiv(x.numel(), 256),
                           block=256),
            save=("x", "w"),
            backward=Launch({"float32": module.get_function("bwd<float>")},
                            args=("x", "w", "grad_y", "grad_z", "grad_x", "grad_w", numel("x")),
                            grid=lambda x: jt.cdiv(x.numel(), 256), block=256),
            grads={"x": Output(like="x"), "w": Output(like="w")})
        print(jt.runner(op).kind)
        def loss(x, w):
            y, z = op(x, w, 0.5)
            return y.sum()                               # z takes no part: its gradient is missing
        for n in (5, 9):
            x, w = meta(n, 3), meta(n, 3)
            print(tuple(torch.autograd.grad(loss(x, w), (x, w))[1].shape))
        compiled = torch.compile(loss, backend="aot_eager", dynamic=True, fullgraph=True)
        for n in (6, 11):
            x, w = meta(n, 3), meta(n, 3)
            print(tuple(torch.autograd.grad(compiled(x, w), (x, w))[0].shape))
        print(error(lambda: op(torch.randn(3), torch.randn(3), 1.0)))
        print("end")
        ''', cache)
    assert out == ["native", "(5, 3)", "(9, 3)", "(6, 3)", "(11, 3)",
                   "ValueError: jb_cpu_two::mul_add: x is a cpu tensor; this op's kernels run on CUDA tensors", "end"]


def test_a_graph_outliving_its_ops_definition_raises(cache):
    """The op's torch.library definitions destroyed while a graph holds its node: backward is an error naming the
    backward op, never a call through a handle without a schema."""
    out = run('''
        m = declare_examples(True, "jb_cpu_destroyed")
        x, b = meta(4, 8), meta(8)
        y = m.fused_bias_gelu(x, b)
        for library in jt._LIBRARIES:
            library._destroy()
        gc.collect()
        print(error(lambda: torch.autograd.grad(y.sum(), (x, b))))
        del y
        gc.collect()
        print("end")
        ''', cache)
    assert out[0].startswith("RuntimeError: jb_cpu_destroyed::fused_bias_gelu: its backward op "
                             "jb_cpu_destroyed::fused_bias_gelu_backward is no longer defined"), out[0]
    assert out[-1] == "end"


def test_a_redeclaration_must_keep_which_inputs_have_gradients_on_both_runners(cache):
    """A graph recorded before a re-declaration calls the current _backward op and gives its results to the inputs
    it was recorded for: grads={"x"} then {"w"} (the same backward schema, one Tensor returned) is refused on both
    runners before anything is swapped, a re-declaration keeping the wiring is taken, and the old graph's gradient
    still goes to x."""
    out = run('''
        from jitbridge.torch import Launch, Output, numel
        src = """
        template <class T> __global__ void fwd(const T* x, const T* w, T* y, long long n) {}
        template <class T> __global__ void bwd(const T* x, const T* w, const T* gy, T* g, long long n) {}
        """
        module = jitbridge.RawModule(code=src, arch="sm_90", name_expressions=["fwd<float>", "bwd<float>"])
        def declaration(grad, block=256):
            return dict(inputs=("x", "w"), outputs={"y": Output(like="x")},
                        forward=Launch({"float32": module.get_function("fwd<float>")}, args=("x", "w", "y", numel("x")),
                                       grid=lambda x: jt.cdiv(x.numel(), block), block=block),
                        save=("x", "w"),
                        backward=Launch({"float32": module.get_function("bwd<float>")},
                                        args=("x", "w", "grad_y", "grad_" + grad, numel("x")),
                                        grid=lambda x: jt.cdiv(x.numel(), block), block=block),
                        grads={grad: Output(like=grad)})
        for native, name in ((True, "jb_cpu_wiring::native_op"), (False, "jb_cpu_wiring::python_op")):
            os.environ["JITBRIDGE_TORCH_NATIVE"] = "1" if native else "0"
            op = jt.custom_op(name, **declaration("x"))
            x, w = meta(4, 8), meta(8)
            y = op(x, w)                                 # a graph recorded under grads={"x"}
            print(jt.runner(op).kind)
            print(error(lambda: jt.custom_op(name, **declaration("w"))))
            print(jt.custom_op(name, **declaration("x", block=128)) == op)
            print(tuple(torch.autograd.grad(y.sum(), x)[0].shape))
            print(error(lambda: op(torch.randn(4, 8), torch.randn(8))))
        print("end")
        ''', cache)
    assert out[-1] == "end"
    for i, (kind, name) in enumerate((("native", "native_op"), ("python", "python_op"))):
        got = out[5 * i:5 * i + 5]
        assert got[0] == kind
        assert got[1] == (f"OpDeclarationError: jb_cpu_wiring::{name}: this process declared the op with gradients "
                          f"for x; a re-declaration replaces its kernels but must keep which inputs have gradients, "
                          f"here w (an autograd graph recorded before would give the new backward's results to the "
                          f"inputs it was recorded for): keep the keys of grads=, or choose another name"), got[1]
        assert got[2:] == ["True", "(4, 8)",
                           f"ValueError: jb_cpu_wiring::{name}: x is a cpu tensor; this op's kernels run on CUDA "
                           f"tensors"], got


def test_a_fresh_declaration_failing_part_way_leaves_the_name_free(cache):
    """A fresh name whose registration fails after its definition (the add-on refusing the description with
    JITBRIDGE_TORCH_NATIVE=1; the _backward name taken by other code on the Python runner) is left unregistered:
    no torch.ops packet pointing at a removed definition (calling one crashed the process), and declaring the name
    again gives a working op."""
    out = run('''
        undo = edit_descriptions("saved i 1", "saved i 7")
        print(error(lambda: declare_examples(True, "jb_cpu_failed")))
        undo()
        gc.collect()
        print(hasattr(torch.ops.jb_cpu_failed, "fused_bias_gelu"))
        print(error(lambda: torch.ops.jb_cpu_failed.fused_bias_gelu(torch.randn(2, 8), torch.randn(8))))
        m = declare_examples(True, "jb_cpu_failed")
        x, b = meta(4, 8), meta(8)
        print(jt.runner(m.fused_bias_gelu).kind, tuple(torch.autograd.grad(m.fused_bias_gelu(x, b).sum(), b)[0].shape))
        print(error(lambda: torch.ops.jb_cpu_failed.fused_bias_gelu(torch.randn(2, 8), torch.randn(8))))
        # the Python runner: the forward defined, then the _backward name is taken by other code
        other = torch.library.Library("jb_cpu_taken", "FRAGMENT")
        other.define("fused_bias_gelu_backward(Tensor x) -> Tensor")
        print(error(lambda: declare_examples(False, "jb_cpu_taken")))
        gc.collect()
        print(hasattr(torch.ops.jb_cpu_taken, "fused_bias_gelu"))
        print(torch.ops.jb_cpu_taken.fused_bias_gelu_backward.default._schema)   # the other code's op is untouched
        other._destroy()
        p = declare_examples(False, "jb_cpu_taken")
        print(jt.runner(p.fused_bias_gelu).kind, tuple(torch.autograd.grad(p.fused_bias_gelu(x, b).sum(), x)[0].shape))
        print(error(lambda: p.fused_bias_gelu(torch.randn(2, 8), torch.randn(8))))
        print("end")
        ''', cache)
    assert out[0] == ("OpDeclarationError: the native runner refused the declaration: jb_cpu_failed::fused_bias_gelu: "
                      "a saved index is out of range"), out[0]
    assert out[1] == "False"
    assert out[2].startswith("AttributeError: "), out[2]
    assert out[3] == "native (8,)"
    assert out[4].startswith("ValueError: jb_cpu_failed::fused_bias_gelu: x is a cpu tensor"), out[4]
    assert out[5].startswith("OpDeclarationError: jb_cpu_taken::fused_bias_gelu_backward: an op of this name is "
                             "already registered in this process by other code"), out[5]
    assert out[6] == "False"
    assert out[7] == "jb_cpu_taken::fused_bias_gelu_backward(Tensor x) -> Tensor"
    assert out[8] == "python (4, 8)"
    assert out[9].startswith("ValueError: jb_cpu_taken::fused_bias_gelu: x is a cpu tensor"), out[9]
    assert out[-1] == "end"


def test_the_op_says_its_runner_in_its_repr_and_stays_an_opoverload(cache):
    out = run('''
        native = declare_examples(True, "jb_cpu_repr_native")
        python = declare_examples(False, "jb_cpu_repr_python")
        for m in (native, python):
            op = m.fused_bias_gelu
            print(repr(op))
            print(isinstance(op, torch._ops.OpOverload), op is getattr(torch.ops, m.__name__).fused_bias_gelu.default,
                  op.jitbridge_runner is jt.runner(op))
        f = torch.compile(lambda x, b: native.fused_bias_gelu(x, b) * 2, fullgraph=True, backend="aot_eager")
        print(tuple(f(meta(4, 8), meta(8)).shape))
        ''', cache)
    assert out[0].startswith("<OpOverload(op='jb_cpu_repr_native.fused_bias_gelu', overload='default'); "
                             "jitbridge runner: native (torch add-on ")
    assert out[2].startswith("<OpOverload(op='jb_cpu_repr_python.fused_bias_gelu', overload='default'); jitbridge "
                             "runner: python (") and "JITBRIDGE_TORCH_NATIVE=0" in out[2]
    assert out[1] == out[3] == "True True True"
    assert out[4] == "(4, 8)"


def test_rule_values_follow_each_calls_shapes_and_scalars(cache):
    """The add-on replays a phase's rule values (output shapes, checks, launches) from its last call with the same
    tensor sizes and scalars (PhaseMemo): each call still gets its own shapes and its own checks, a failed call stores
    nothing. CPU tensors through a trusted phase (as bench_torch_addon_cpu.py): the outputs are allocated, nothing
    launches."""
    out = run('''
        from jitbridge.torch import Launch, Output, numel
        edit_descriptions("\\nendphase", "\\ntrusted 1\\nendphase")  # CPU tensors pass; nothing launches
        os.environ["JITBRIDGE_TORCH_NATIVE"] = "1"
        module = jitbridge.RawModule(code='extern "C" __global__ void k(const float* x, float* y, long long n) {}',
                                     arch="sm_90")
        op = jt.custom_op("jb_cpu_memo::tile", inputs=("x", "n: int"),
                          outputs={"y": Output(shape=lambda x, n: (n * x.shape[0], x.shape[-1] + 1))},
                          check=jt.Check(lambda x: x.shape[-1] <= 8, "x's last dimension must be at most 8"),
                          forward=Launch(module.get_function("k"), args=("x", "y", numel("x")), grid=1, block=1))
        print(jt.runner(op).kind)
        def shape_of(shape, n):
            try:
                return str(tuple(op(torch.zeros(shape), n).shape))
            except ValueError as e:
                return "ValueError" if "at most 8" in str(e) else str(e)
        print(" ".join(shape_of(s, n) for s, n in [((2, 3), 1), ((2, 3), 1), ((3, 2), 1), ((2, 3), 4), ((2, 9), 1),
                                                   ((2, 9), 1), ((2, 3), 1), ((9, 2), 1), ((5,), 2), ((5,), 2)]))
        ''', cache)
    assert out[0] == "native"
    assert out[1] == "(2, 4) (2, 4) (3, 3) (8, 4) ValueError ValueError (2, 4) (9, 3) (10, 6) (10, 6)", out[1]
