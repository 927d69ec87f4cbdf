"""jitbridge.torch declarations, the %%cuda_kernel magic and the notebook runner, without a GPU or torch.

Declarations are checked against real kernels compiled for sm_90 (NVRTC runs here); the checks happen before torch
is imported, so every declaration error is observable here. Registration itself is replaced by a stand-in where a
test needs a declaration to pass (torch may be absent)."""
import importlib.util
import json
import math
import types
from pathlib import Path

import pytest

import jitbridge
import jitbridge.torch as jt
from jitbridge.ipython import MagicArgumentError, cuda_kernel_magic
from jitbridge.torch import Launch, OpDeclarationError, Output, numel, size

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "notebook" / "prototype_kernel.ipynb"

SRC = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <jitbridge/tensor.cuh>
template <class T> __global__ void scale(const T* x, T* y, T alpha, long long n) {}
template <class T> __global__ void scale_grad(const T* gy, T* gx, T alpha, long long n) {}
extern "C" __global__ void fwd_f(const float* x, float* y, long long n) {}
extern "C" __global__ void writes_input(float* x, float* y, long long n) {}
extern "C" __global__ void reads_only(const float* x, const float* y, long long n) {}
extern "C" __global__ void bwd_f(const float* gy, float* gx, long long n) {}
extern "C" __global__ void gather(const float* x, const long long* idx, float* y, long long n) {}
extern "C" __global__ void fwd_h(const __half* x, __half* y, long long n) {}
extern "C" __global__ void fwd_view(jitbridge::Tensor<const __nv_bfloat16, 2> x, jitbridge::Tensor<__nv_bfloat16, 2> y) {}
'''


@pytest.fixture(scope="module")
def kernels():
    module = jitbridge.RawModule(code=SRC, arch="sm_90", name_expressions=[
        f"{k}<{t}>" for k in ("scale", "scale_grad") for t in ("float", "double")])
    k = types.SimpleNamespace(**{n: module.get_function(n) for n in
                                 ("fwd_f", "writes_input", "reads_only", "bwd_f", "gather", "fwd_h", "fwd_view")})
    k.scale = {"float32": module.get_function("scale<float>"), "float64": module.get_function("scale<double>")}
    k.scale_grad = {"float32": module.get_function("scale_grad<float>"),
                    "float64": module.get_function("scale_grad<double>")}
    return k


@pytest.fixture
def declare(monkeypatch, kernels):
    """declare(**overrides) -> the checked OpSpec of 'tests::scale' (a valid op, changed by ``overrides``), through
    jitbridge.torch.custom_op with registration stubbed out."""
    monkeypatch.setattr(jt, "_register_custom_op", lambda spec: spec)

    def make(**overrides):
        spec = dict(
            inputs=("x", "alpha: float"),
            outputs={"y": Output(like="x")},
            forward=Launch(kernels.scale, args=("x", "y", "alpha", numel("x")),
                           grid=lambda x: (x.numel() + 255) // 256, block=256),
            backward=Launch(kernels.scale_grad, args=("grad_y", "grad_x", "alpha", numel("grad_y")),
                            grid=lambda grad_y: (grad_y.numel() + 255) // 256, block=256),
            grads={"x": Output(like="grad_y")},
        )
        spec.update(overrides)
        return jt.custom_op("tests::scale", **spec)

    return make


def declaration_error(make, **overrides):
    with pytest.raises(OpDeclarationError) as info:
        make(**overrides)
    return str(info.value)


def test_a_valid_declaration_gives_both_schemas_and_its_dtypes(declare):
    spec = declare()
    assert spec.forward.schema(1) == "(Tensor x, float alpha) -> Tensor"
    assert spec.backward.schema(1) == "(Tensor grad_y, float alpha) -> Tensor"
    assert spec.forward.allowed == ("float32", "float64")
    assert spec.backward.allowed == ("float32", "float64")
    assert issubclass(OpDeclarationError, ValueError)


def test_wrong_parameter_count(declare, kernels):
    msg = declaration_error(declare, forward=Launch(kernels.fwd_f, args=("x", "y"), grid=1, block=32))
    assert "tests::scale" in msg and "forward launch 1 (fwd_f)" in msg
    assert "takes 3 parameters (float const*, float*, long long), but args= has 2 entries" in msg


def test_tensor_into_a_value_parameter(declare, kernels):
    msg = declaration_error(declare, forward=Launch(kernels.fwd_f, args=("x", "y", "x"), grid=1, block=32))
    assert "tests::scale" in msg and "fwd_f" in msg
    assert "args[2] is the tensor 'x', but parameter 2 (long long) is a value" in msg


def test_scalars_into_a_pointer_parameter(declare, kernels):
    msg = declaration_error(declare, forward=Launch(kernels.fwd_f, args=("alpha", "y", 4), grid=1, block=32))
    assert "args[0] is the scalar input 'alpha', but parameter 0 (float const*) takes a tensor" in msg
    msg = declaration_error(declare, forward=Launch(kernels.fwd_f, args=(1.5, "y", 4), grid=1, block=32))
    assert "fwd_f" in msg and "args[0] is the constant 1.5, but parameter 0 (float const*)" in msg
    msg = declaration_error(declare, forward=Launch(kernels.fwd_f, args=(numel("x"), "y", 4), grid=1, block=32))
    assert "the callable numel('x')" in msg


def test_unknown_names_in_args_and_in_callables(declare, kernels):
    msg = declaration_error(declare, forward=Launch(kernels.scale, args=("x", "z", "alpha", numel("x")),
                                                    grid=1, block=32))
    assert "tests::scale: forward: forward launch 1" in msg and "args[1]: unknown name 'z'" in msg
    msg = declaration_error(declare, forward=Launch(kernels.scale, args=("x", "y", "alpha", numel("x")),
                                                    grid=lambda w: 1, block=32))
    assert "grid=" in msg and "asks for 'w'" in msg
    msg = declaration_error(declare, forward=Launch(kernels.scale, args=("x", "y", "alpha", size("q", 0)),
                                                    grid=1, block=32))
    assert "size('q', 0)" in msg and "unknown name 'q'" in msg
    msg = declaration_error(declare, forward=Launch(kernels.scale, args=("x", "grad_x", "alpha", numel("x")),
                                                    grid=1, block=32))
    assert "gradients exist only in backward launches" in msg
    msg = declaration_error(declare, outputs={"y": Output(like="x"), "z": Output(like="y")})
    assert "output 'z': like='y': 'y' cannot be used here; this sees only x" in msg
    msg = declaration_error(declare, check=lambda x, y: None)
    assert "check (" in msg and "asks for 'y'" in msg


def test_backward_using_an_unsaved_input(declare, kernels):
    msg = declaration_error(declare, backward=Launch(kernels.scale_grad, args=("x", "grad_x", "alpha", numel("x")),
                                                     grid=1, block=32))
    assert "tests::scale: backward" in msg and "scale_grad" in msg
    assert "x is not saved for the backward: add it to save=" in msg
    spec = declare(save=("x",), grads={"x": Output(like="x")},
                   backward=Launch(kernels.scale_grad, args=("x", "grad_x", "alpha", numel("x")), grid=1, block=32))
    assert spec.backward.schema(1) == "(Tensor x, float alpha) -> Tensor"  # grad_y is unused, so not passed


def test_grads_and_backward_come_together(declare):
    msg = declaration_error(declare, backward=())
    assert "grads= is given without backward=" in msg and "grad_x" in msg
    msg = declaration_error(declare, grads=None)
    assert "backward= is given without grads=" in msg
    msg = declaration_error(declare, grads={"alpha": Output(like="grad_y")})
    assert "'alpha', which is not a tensor input" in msg


def test_a_declared_gradient_no_backward_launch_writes(declare, kernels):
    msg = declaration_error(declare, inputs=("x", "w", "alpha: float"),
                            grads={"x": Output(like="grad_y"), "w": Output(like="grad_y")})
    assert "tests::scale: backward: declared gradient grad_w is written by no backward launch" in msg


def test_output_into_a_const_pointer(declare, kernels):
    msg = declaration_error(declare, forward=Launch(kernels.reads_only, args=("x", "y", numel("x")),
                                                    grid=1, block=32))
    assert "forward launch 1 (reads_only): args[1] 'y' goes into const parameter 1 (float const*)" in msg
    msg = declaration_error(declare, backward=Launch(kernels.reads_only, args=("grad_y", "grad_x", numel("grad_y")),
                                                     grid=1, block=32))
    assert "backward launch 1 (reads_only): args[1] 'grad_x' goes into const parameter 1" in msg


def test_input_into_a_non_const_pointer(declare, kernels):
    msg = declaration_error(declare, forward=Launch(kernels.writes_input, args=("x", "y", numel("x")),
                                                    grid=1, block=32))
    assert "args[0] 'x' goes into parameter 0 (float*), which is not const" in msg
    assert "must not write its inputs" in msg


def test_dtype_key_that_does_not_match_the_pointee(declare, kernels):
    swapped = {"float32": kernels.scale["float64"], "float64": kernels.scale["float64"]}
    msg = declaration_error(declare, forward=Launch(swapped, args=("x", "y", "alpha", numel("x")), grid=1, block=32))
    assert "tests::scale" in msg and "scale<double>" in msg and "the kernel for float32" in msg
    assert "args[0] is 'x', a float32 tensor, but parameter 0 is double const*" in msg
    # An output whose dtype is declared explicitly is checked against that dtype, not the key.
    msg = declaration_error(declare, outputs={"y": Output(like="x", dtype="float64")})
    assert "args[1] is 'y', a float64 tensor, but parameter 1 is float*" in msg


def test_plain_kernels_fix_the_dtypes_they_take(declare, kernels):
    spec = declare(inputs=("x", "idx"), outputs={"y": Output(like="x")}, backward=(), grads=None,
                   forward=Launch(kernels.gather, args=("x", "idx", "y", numel("x")), grid=1, block=32))
    assert spec.forward.allowed == ("float32",)
    assert spec.forward.required[None] == {"x": "float32", "idx": "int64"}
    # With dtype dicts, an integer pointee fixes that input's dtype whatever the key.
    gather = {"float32": kernels.gather, "float64": kernels.gather}
    msg = declaration_error(declare, inputs=("x", "idx"), outputs={"y": Output(like="x")}, backward=(), grads=None,
                            forward=Launch(gather, args=("x", "idx", "y", numel("x")), grid=1, block=32))
    assert "the kernel for float64" in msg and "a float64 tensor, but parameter 0 is float const*" in msg


def test_half_bfloat16_and_tensor_view_params_are_dtype_checked_when_declared(declare, kernels):
    # The pointee and element dtypes come from the core (Param.dtype), so __half, __nv_bfloat16 and Tensor views
    # are checked at declaration as at launch.
    plain = dict(inputs=("x",), outputs={"y": Output(like="x")}, backward=(), grads=None)
    spec = declare(forward=Launch(kernels.fwd_h, args=("x", "y", numel("x")), grid=1, block=32), **plain)
    assert spec.forward.required[None] == {"x": "float16"}
    halfs = {"float32": kernels.fwd_h, "float64": kernels.fwd_h}
    msg = declaration_error(declare, forward=Launch(halfs, args=("x", "y", numel("x")), grid=1, block=32), **plain)
    assert "args[0] is 'x', a float32 tensor, but parameter 0 is __half const*" in msg and "holds float16" in msg
    spec = declare(forward=Launch(kernels.fwd_view, args=("x", "y"), grid=1, block=32), **plain)
    assert spec.forward.required[None] == {"x": "bfloat16"}
    msg = declaration_error(declare, forward=Launch({"float32": kernels.fwd_view}, args=("x", "y"), grid=1, block=32),
                            **plain)
    assert "a float32 tensor, but parameter 0 is jitbridge::Tensor<" in msg and "holds bfloat16" in msg


def test_backward_must_cover_the_forward_dtypes(declare, kernels):
    msg = declaration_error(declare, backward=Launch(kernels.bwd_f, args=("grad_y", "grad_x", numel("grad_y")),
                                                     grid=1, block=32))
    assert "the backward has no kernels for float64 (the forward takes float32, float64)" in msg


def test_launches_of_one_phase_must_cover_the_same_dtypes(declare, kernels):
    only_float = {"float32": kernels.scale["float32"]}
    msg = declaration_error(declare, forward=(
        Launch(kernels.scale, args=("x", "y", "alpha", numel("x")), grid=1, block=32),
        Launch(only_float, args=("x", "y", "alpha", numel("x")), grid=1, block=32)))
    assert "cover different dtypes" in msg and "launch 2: float32" in msg


def test_save_names_and_op_name_and_duplicates(declare):
    assert "scalars reach the backward by themselves" in declaration_error(declare, save=("alpha",))
    assert "'q', which is not a tensor input or an output" in declaration_error(declare, save=("q",))
    assert "declared twice" in declaration_error(declare, outputs={"x": Output(like="x")})
    assert "reserved for gradients" in declaration_error(declare, inputs=("grad_q", "alpha: float"))
    assert "the kind must be Tensor, float, int or bool" in declaration_error(declare, inputs=("x", "alpha: double"))
    with pytest.raises(OpDeclarationError, match="expected 'namespace::name'"):
        jt.custom_op("no_namespace", inputs=("x",), outputs={"y": Output(like="x")}, forward=())


def test_output_and_launch_arguments_are_checked_when_made(kernels):
    with pytest.raises(OpDeclarationError, match="exactly one of like= .* and shape="):
        Output()
    with pytest.raises(OpDeclarationError, match="exactly one of"):
        Output(like="x", shape=(2,))
    with pytest.raises(OpDeclarationError, match="shape= takes a callable or a tuple of ints"):
        Output(shape="x")
    with pytest.raises(OpDeclarationError, match="'float23' is not a dtype"):
        Launch({"float23": kernels.fwd_f}, args=(), grid=1, block=1)
    with pytest.raises(OpDeclarationError, match="grid= takes an int, a tuple of 1 to 3 ints"):
        Launch(kernels.fwd_f, args=(), grid=(1, 2, 3, 4), block=1)
    with pytest.raises(OpDeclarationError, match="is not a kernel"):
        Launch("fwd_f", args=(), grid=1, block=1)

    class dtype:  # what a torch dtype looks like from here: converted by name, torch never imported
        def __str__(self):
            return "torch.float64"

    assert set(Launch({dtype(): kernels.fwd_f}, args=(), grid=1, block=1).kernels) == {"float64"}


def test_kernels_without_a_signature_are_accepted_unchecked(declare):
    calls = []

    def from_binary(grid, block, args, **kw):  # what a kernel loaded from a .cubin offers: no signature
        calls.append(args)

    spec = declare(forward=Launch(from_binary, args=("x", "y", 3), grid=1, block=1), backward=(), grads=None)
    assert spec.forward.allowed is None and calls == []


def test_function_checks_the_same_declaration(monkeypatch, kernels):
    monkeypatch.setattr(jt, "_make_function", lambda spec: spec)
    with pytest.raises(OpDeclarationError, match="my_scale: forward: forward launch 1 .*takes 3 parameters"):
        jt.function(name="my_scale", inputs=("x",), outputs={"y": Output(like="x")},
                    forward=Launch(kernels.fwd_f, args=("x", "y"), grid=1, block=1))


def test_importing_jitbridge_torch_does_not_import_torch(run_python):
    out = run_python("import sys, jitbridge, jitbridge.torch, jitbridge.ipython; print('torch' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_registering_without_torch_is_a_clear_import_error(kernels):
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here")
    with pytest.raises(ImportError, match="jitbridge.torch.custom_op needs PyTorch .*checked without it"):
        jt.custom_op("tests::plain", inputs=("x",), outputs={"y": Output(like="x")},
                     forward=Launch(kernels.fwd_f, args=("x", "y", numel("x")), grid=1, block=32))


def load_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_ops_declare_cleanly(monkeypatch):
    monkeypatch.setattr(jt, "_register_custom_op", lambda spec: spec)
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "torch"))
    ops = load_file(ROOT / "examples" / "torch" / "ops.py", "jitbridge_example_ops_declare")
    gelu, softmax = ops.fused_bias_gelu, ops.row_softmax
    assert gelu.forward.schema(1) == "(Tensor x, Tensor bias) -> Tensor"
    assert gelu.backward.schema(2) == "(Tensor x, Tensor bias, Tensor grad_y) -> (Tensor, Tensor)"
    assert softmax.backward.schema(1) == "(Tensor y, Tensor grad_y) -> Tensor"
    for spec in (gelu, softmax):
        assert spec.forward.allowed == spec.backward.allowed == ("float32", "float64")
    assert [r.name for r in gelu.backward.scratch] == ["partial"]


class _Device:
    def __init__(self, kind, index=0):
        self.type, self.index = kind, index

    def __eq__(self, other):
        return (self.type, self.index) == (other.type, other.index)

    def __str__(self):
        return f"{self.type}:{self.index}"


class _FakeTensor:
    """Just enough of a torch.Tensor for the op runner: shape, dtype, device."""

    def __init__(self, shape, dtype, device):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def get_device(self):
        return self.device.index if self.is_cuda else -1

    def numel(self):
        return math.prod(self.shape)

    def dim(self):
        return len(self.shape)

    def is_contiguous(self):
        return True

    def contiguous(self):
        return self


class _Dtype:
    def __init__(self, name):
        self.name = name


def _stand_in_torch():
    torch = types.SimpleNamespace(Tensor=_FakeTensor)
    for name in jt.DTYPE_NAMES:
        setattr(torch, name, _Dtype(name))
    torch.empty = torch.zeros = lambda shape, dtype, device: _FakeTensor(shape, dtype, device)
    torch.empty_like = lambda t, dtype=None, memory_format=None: _FakeTensor(t.shape, dtype or t.dtype, t.device)
    torch.contiguous_format = "contiguous_format"
    return torch


def test_the_op_runner_checks_before_launching_and_passes_declared_arguments(monkeypatch):
    """The runtime path with a stand-in for torch: arguments reach each kernel in declared order, scratch and
    outputs get their rule's shapes, and every error is raised before the first launch."""
    monkeypatch.setattr(jt, "_register_custom_op", lambda spec: spec)
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "torch"))
    ops = load_file(ROOT / "examples" / "torch" / "ops.py", "jitbridge_example_ops_runner")
    spec = ops.fused_bias_gelu
    launches = []
    for plan in spec.forward.launches + spec.backward.launches:
        plan.kernels = {key: (lambda name: lambda grid, block, args, **kw: launches.append((name, grid, block, args)))(
            k.name) for key, k in plan.kernels.items()}
    torch = _stand_in_torch()
    forward = jt._phase_runner(spec.forward, True, torch, fake=False)
    backward = jt._phase_runner(spec.backward, True, torch, fake=False)
    cuda = _Device("cuda")
    x, bias = _FakeTensor((300, 1024), torch.float32, cuda), _FakeTensor((1024,), torch.float32, cuda)
    y = forward(x, bias)
    assert y.shape == (300, 1024) and launches == [("bias_gelu_fwd<float>", 300, 256, (x, bias, y, 300 * 1024, 1024))]
    launches.clear()
    grad_x, grad_bias = backward(x, bias, _FakeTensor((300, 1024), torch.float32, cuda))
    assert (grad_x.shape, grad_bias.shape) == ((300, 1024), (1024,))
    (name1, grid1, _, args1), (name2, grid2, block2, args2) = launches
    assert (name1, grid1, args1[5:]) == ("bias_gelu_bwd<float>", (1, 5), (grad_bias, 300, 1024))
    assert args1[4].shape == (5, 1024) and args1[4] is args2[0]     # scratch: [row blocks, C], shared
    assert (name2, grid2, block2, args2[1], args2[2:]) == ("bias_grad_reduce<float>", 32, (32, 16), grad_bias,
                                                           (5, 1024))
    launches.clear()
    # One row block (at most 64 rows): its sums are grad_bias, so the reduction is not launched and the scratch
    # is empty; no rows: the reduction alone runs, writing zeros.
    small = _FakeTensor((64, 1024), torch.float32, cuda)
    grad_x, grad_bias = backward(small, bias, _FakeTensor((64, 1024), torch.float32, cuda))
    ((name1, grid1, _, args1),) = launches
    assert (name1, grid1, args1[4].shape, args1[5:]) == ("bias_gelu_bwd<float>", (1, 1), (0, 1024),
                                                         (grad_bias, 64, 1024))
    launches.clear()
    none = _FakeTensor((0, 1024), torch.float32, cuda)
    grad_x, grad_bias = backward(none, bias, _FakeTensor((0, 1024), torch.float32, cuda))
    ((name2, grid2, _, args2),) = launches
    assert (name2, grid2, args2[0].shape, args2[1], args2[2:]) == ("bias_grad_reduce<float>", 32, (0, 1024),
                                                                   grad_bias, (0, 1024))
    launches.clear()
    bad_calls = [
        ((_FakeTensor((4, 8), torch.float32, _Device("cpu")), bias), ValueError, "x is a cpu tensor"),
        ((x, _FakeTensor((8,), torch.float32, cuda)), ValueError, "bias must have shape"),
        ((_FakeTensor((4, 8), torch.int32, cuda), bias), TypeError, "x has dtype int32; the kernels are declared "
                                                                    "for float32, float64"),
        ((x, _FakeTensor((1024,), torch.float64, cuda)), TypeError, "bias has dtype float64, expected float32"),
        ((x, _FakeTensor((1024,), torch.float32, _Device("cuda", 1))), ValueError, "bias is on cuda:1 but x is on"),
    ]
    for args, error, message in bad_calls:
        with pytest.raises(error, match=message):
            forward(*args)
    assert launches == []


# ---- the %%cuda_kernel magic --------------------------------------------------------------------------------

KERNEL_CELL = 'extern "C" __global__ void fill(float* y, int n) {\n  if (threadIdx.x < n) y[threadIdx.x] = N;\n}\n'


def test_magic_compiles_the_cell_into_the_namespace(capsys):
    namespace = {}
    kernel = cuda_kernel_magic("fill --arch sm_90 -O -DN=4", KERNEL_CELL, namespace)
    assert namespace == {"fill": kernel} and isinstance(kernel, jitbridge.RawKernel)
    assert str(kernel.signature) == "(float*, int)"
    assert "fill = fill(float*, int):" in capsys.readouterr().out
    again = cuda_kernel_magic("fill --arch sm_90 --option=-DN=4 --as fill2 --quiet", KERNEL_CELL, namespace)
    assert namespace["fill2"] is again and capsys.readouterr().out == ""
    template = cuda_kernel_magic('"twice<double>" --as twice_d --arch sm_90 --quiet',
                                 "template <class T> __global__ void twice(T* v) { v[0] *= 2; }", namespace)
    assert namespace["twice_d"] is template and str(template.signature) == "(double*)"


def test_magic_compile_error_shows_the_offending_line():
    with pytest.raises(jitbridge.CompileError) as info:
        cuda_kernel_magic("fill --arch sm_90", KERNEL_CELL, {})     # N is not defined without -DN=...
    text = str(info.value)
    assert "fill.cu:2:" in text and "y[threadIdx.x] = N;" in text and "^" in text
    assert info.value.line == 2


@pytest.mark.parametrize("line, message", [
    ("", "the following arguments are required: name"),
    ("fill --bogus", "unrecognized arguments: --bogus"),
    ("fill --arch", "expected one argument"),
    ('"fill<float>"', "'fill<float>' is not a Python name; bind it with --as VAR"),
    ("fill 'unclosed", "cannot split the line"),
])
def test_magic_argument_errors(line, message):
    with pytest.raises(MagicArgumentError, match=message) as info:
        cuda_kernel_magic(line, KERNEL_CELL, {})
    assert isinstance(info.value, ValueError) and "%%cuda_kernel" in str(info.value)


def test_load_ipython_extension_registers_the_cell_magic():
    class Shell:
        user_ns = {}
        registered = []

        def register_magic_function(self, fn, magic_kind, magic_name):
            self.registered.append((fn, magic_kind, magic_name))

    shell = Shell()
    jitbridge.load_ipython_extension(shell)
    ((fn, kind, name),) = shell.registered
    assert (kind, name) == ("cell", "cuda_kernel")
    fn("fill --arch sm_90 -O -DN=1 --quiet", KERNEL_CELL)
    assert isinstance(shell.user_ns["fill"], jitbridge.RawKernel)


# ---- the notebook and its runner ----------------------------------------------------------------------------

def notebook_cells():
    notebook = json.loads(NOTEBOOK.read_text())
    assert notebook["nbformat"] == 4
    return notebook["cells"]


def source_of(cell):
    return "".join(cell["source"])


def test_notebook_tags_its_compile_error():
    # Its recorded outputs are checked in test_notebook_outputs.py.
    cells = notebook_cells()
    code = [c for c in cells if c["cell_type"] == "code"]
    assert source_of(code[0]).startswith("%load_ext jitbridge")
    tagged = [c for c in code if "raises-exception" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1 and source_of(tagged[0]).startswith("%%cuda_kernel")
    assert any(c["cell_type"] == "markdown" for c in cells)


@pytest.fixture
def runner():
    return load_file(ROOT / "examples" / "notebook" / "run_notebook.py", "jitbridge_run_notebook")


def write_notebook(path, cells):
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_runner_runs_the_notebooks_kernel_cells(runner, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JITBRIDGE_ARCH", "sm_90")
    magic_cells = [c for c in notebook_cells() if c["cell_type"] == "code" and source_of(c).startswith("%%")]
    first = {"cell_type": "code", "metadata": {}, "source": "%load_ext jitbridge\nkernels = []\n"}
    last = {"cell_type": "code", "metadata": {}, "source": "kernels = [swish, swish_beta]\nlen(kernels)"}
    namespace = runner.run_notebook(write_notebook(tmp_path / "stub.ipynb", [first] + magic_cells + [last]))
    assert [k.name for k in namespace["kernels"]] == ["swish", "swish_beta"]
    assert str(namespace["swish_beta"].signature) == "(float const*, float*, float, int)"
    out = capsys.readouterr().out
    assert "CompileError: swish_beta.cu:3:" in out and "expf(-beta * x[i])" in out     # the tagged cell's error
    assert "from the memory cache" in out and out.rstrip().endswith("2")                # re-run; last expression


def test_runner_refuses_other_magics_and_untriggered_expected_errors(runner, tmp_path):
    timeit = {"cell_type": "code", "metadata": {}, "source": ["x = 1\n", "%timeit x + 1\n"]}
    with pytest.raises(runner.NotebookError, match=r"cell 1, line 2: '%timeit' is not supported"):
        runner.run_notebook(write_notebook(tmp_path / "a.ipynb", [timeit]))
    calm = {"cell_type": "code", "metadata": {"tags": ["raises-exception"]}, "source": "x = 1\n"}
    with pytest.raises(runner.NotebookError, match="cell 1 is tagged raises-exception but ran without an error"):
        runner.run_notebook(write_notebook(tmp_path / "b.ipynb", [calm]))
    failing = {"cell_type": "code", "metadata": {}, "source": "1 / 0\n"}
    with pytest.raises(runner.NotebookError, match="cell 1 raised ZeroDivisionError"):
        runner.run_notebook(write_notebook(tmp_path / "c.ipynb", [failing]))
    assert runner.main([str(write_notebook(tmp_path / "d.ipynb", [failing]))]) == 1
