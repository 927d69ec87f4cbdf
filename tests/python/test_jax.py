"""jitbridge.jax without a GPU: importing jitbridge never imports JAX; kernel_call's and custom_op's trace-time
checks; the custom calls they lower to (payload contents, one call per phase, grad and vmap structure), traced for
the CUDA platform. The GPU runs are in test_jax_gpu.py; the handler itself is tested in C++ (ctest c_api)."""
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import jitbridge

SCALE = r'''
#include <jitbridge/tensor.cuh>
extern "C" __global__ void scale(const float* x, float* y, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i]; }
extern "C" __global__ void scale_grad(const float* gy, float* gx, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) gx[i] = a * gy[i]; }
extern "C" __global__ void scale_by(const float* x, float* y, const float* a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = *a * x[i]; }
extern "C" __global__ void in_place(float* x, long long n) {}
extern "C" __global__ void bad_copy(float* x, float* y) {}
extern "C" __global__ void view(jitbridge::Tensor<const float, 2> x, float* y) {}
extern "C" __global__ void row_bias(const float* x, const float* b, float* y, long long n, long long c) {}
extern "C" __global__ void row_bias_grad(const float* gy, float* gx, float* gb, long long n, long long c) {}
'''


def test_import_jitbridge_does_not_import_jax():
    code = "import sys, jitbridge; import jitbridge.torch; assert 'jax' not in sys.modules, 'jax imported'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=None)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


if os.environ.get("JITBRIDGE_REQUIRE_JAX") == "1":
    import jax  # scripts/check-jax: a missing JAX fails rather than skips
else:
    jax = pytest.importorskip("jax", reason="JAX is not installed (scripts/check-jax installs it for these tests)")
jnp = pytest.importorskip("jax.numpy")
import jitbridge._jaxcall as jcall  # noqa: E402
import jitbridge.jax as jj  # noqa: E402


@pytest.fixture(scope="module")
def module():
    return jitbridge.RawModule(code=SCALE, options=("-DJB_TEST=1",), arch="sm_90")


def ffi_payloads(fn, *args):
    """The payload (decoded) of every jitbridge custom call in fn's jaxpr, nested jaxprs included, in order."""
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "ffi_call" and eqn.params["target_name"] == jj.TARGET:
                found.append(json.loads(dict(eqn.params["attributes"])["jitbridge"]))
            for v in eqn.params.values():
                for j in (v if isinstance(v, (tuple, list)) else (v,)):
                    inner = getattr(j, "jaxpr", j)
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return found


def scale_call(k, x, a=2.0):
    return jj.kernel_call(k, x, jj.Out(like=x), a, x.size, grid=(x.size + 255) // 256, block=256)


def test_kernel_call_payload_names_the_kernel_by_its_source(module):
    k = module.get_function("scale")
    x = jnp.ones((1000,), jnp.float32)
    (p,) = ffi_payloads(lambda x: scale_call(k, x), x)
    assert p["v"] == 1
    (launch,) = p["launches"]
    assert launch["kernel"] == "scale"
    assert launch["source"] == SCALE
    assert launch["options"] == ["-DJB_TEST=1"]
    assert launch["arch"] == "sm_90"
    assert launch["grid"] == [4, 1, 1] and launch["block"] == [256, 1, 1]
    assert launch["args"] == [["in", 0], ["out", 0], ["float", 2.0], ["int", 1000]]
    assert launch["check_args"] is True
    assert "pointer" not in json.dumps(p)
    # The key the handler looks calls up by (not the payload, hashed per execution): the payload's digest.
    (eqn,) = [e for e in jax.make_jaxpr(lambda x: scale_call(k, x))(x).jaxpr.eqns if e.primitive.name == "ffi_call"]
    attributes = dict(eqn.params["attributes"])
    assert attributes["jitbridge_key"] == hashlib.blake2b(attributes["jitbridge"].encode(), digest_size=16).hexdigest()


def test_kernel_call_lowers_to_a_custom_call_for_cuda(module):
    k = module.get_function("scale")
    x = jnp.ones((1000,), jnp.float32)
    lowered = jax.jit(lambda x: scale_call(k, x)).trace(x).lower(lowering_platforms=("cuda",))
    text = lowered.as_text()
    assert f"stablehlo.custom_call @{jj.TARGET}" in text
    assert "mhlo.backend_config = {jitbridge = " in text  # the typed FFI's attribute dictionary


def test_kernel_call_trace_time_errors_name_the_argument(module):
    k = module.get_function("scale")
    x = jnp.ones((1000,), jnp.float32)
    with pytest.raises(TypeError, match=r"scale argument 0 \(float const\*\): expected float32, got int32"):
        jax.jit(lambda x: scale_call(k, x)).trace(x.astype(jnp.int32))
    with pytest.raises(TypeError, match=r"scale takes 4 arguments .*, got 3"):
        jj.kernel_call(k, x, jj.Out(like=x), 2.0, grid=4, block=256)
    with pytest.raises(TypeError, match=r"argument 2: parameter \(float\) takes a float, got 'a'"):
        jj.kernel_call(k, x, jj.Out(like=x), "a", 1000, grid=4, block=256)
    with pytest.raises(ValueError, match=r"scale argument 0 \(float const\*\): a result goes to a const pointer"):
        jj.kernel_call(k, jj.Out(like=x), jj.Out(like=x), 2.0, 1000, grid=4, block=256)
    with pytest.raises(ValueError, match=r"no Out\(...\) among the arguments"):
        jj.kernel_call(k, x, x, 2.0, 1000, grid=4, block=256)
    with pytest.raises(TypeError, match=r"grid= takes an int or a tuple of 1 to 3 ints"):
        jj.kernel_call(k, x, jj.Out(like=x), 2.0, 1000, grid=(1, 2, 3, 4), block=256)
    bad_copy = module.get_function("bad_copy")
    with pytest.raises(ValueError, match=r"bad_copy argument 0 \(float\*\): an input array .* non-const pointer"):
        jj.kernel_call(bad_copy, x, jj.Out(like=x), grid=4, block=256)
    view = module.get_function("view")
    with pytest.raises(ValueError, match=r"view argument 0 .*expected an array of rank 2, got shape \(1000,\)"):
        jj.kernel_call(view, x, jj.Out(like=x), grid=4, block=256)


def test_kernel_call_refuses_kernels_xla_cannot_rebuild(tmp_path):
    (tmp_path / "inc.h").write_text("#define FACTOR 2\n")
    k = jitbridge.RawKernel('#include "inc.h"\n' + SCALE, "scale", include_paths=[str(tmp_path)], arch="sm_90")
    x = jnp.ones((8,), jnp.float32)
    with pytest.raises(ValueError, match=r"include_paths=.*pass the headers with headers="):
        scale_call(k, x)


def scale_op(module, **extra):
    decl = dict(
        inputs=("x", "a: float"),
        outputs={"y": jj.Output(like="x")},
        forward=jj.Launch(module.get_function("scale"), args=("x", "y", "a", jj.numel("x")),
                          grid=lambda x: (x.numel() + 255) // 256, block=256),
        backward=jj.Launch(module.get_function("scale_grad"), args=("grad_y", "grad_x", "a", jj.numel("grad_y")),
                           grid=lambda grad_y: (grad_y.numel() + 255) // 256, block=256),
        grads={"x": jj.Output(like="grad_y")},
    )
    decl.update(extra)
    return decl


def test_custom_op_forward_and_grad_are_one_call_per_phase(module):
    op = jj.custom_op(**scale_op(module))
    x = jnp.ones((1000,), jnp.float32)
    (fwd,) = ffi_payloads(lambda x: op(x, 3.0), x)
    assert [l["kernel"] for l in fwd["launches"]] == ["scale"]
    assert fwd["launches"][0]["args"] == [["in", 0], ["out", 0], ["float", 3.0], ["int", 1000]]

    value_and_grad = jax.value_and_grad(lambda x: op(x, 3.0).sum())
    kernels = [l["kernel"] for p in ffi_payloads(value_and_grad, x) for l in p["launches"]]
    assert kernels == ["scale", "scale_grad"]
    text = jax.jit(value_and_grad).trace(x).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count(f"stablehlo.custom_call @{jj.TARGET}") == 2
    # The gradient alone: the forward call (nothing saved, no side effects) is dead code for XLA.
    text = jax.jit(jax.grad(lambda x: op(x, 3.0).sum())).trace(x).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count(f"stablehlo.custom_call @{jj.TARGET}") == 1


def test_custom_op_under_vmap_runs_per_batch_element(module):
    op = jj.custom_op(**scale_op(module))
    xs = jnp.ones((5, 1000), jnp.float32)
    text = jax.jit(jax.vmap(lambda x: op(x, 3.0))).trace(xs).lower(lowering_platforms=("cuda",)).as_text()
    assert f"stablehlo.custom_call @{jj.TARGET}" in text
    assert "stablehlo.while" in text  # sequential: a loop over the batch
    (p,) = ffi_payloads(jax.vmap(lambda x: op(x, 3.0)), xs)
    assert p["launches"][0]["args"][3] == ["int", 1000]  # each call sees one element's shape


def test_custom_op_declaration_errors_are_the_torch_sides(module):
    # The same OpSpec checks the declaration: an input written through a non-const pointer is refused.
    bad = scale_op(module, forward=jj.Launch(module.get_function("in_place"), args=("x", jj.numel("x")),
                                             grid=1, block=1))
    with pytest.raises(jj.OpDeclarationError, match=r"must not write its inputs"):
        jj.custom_op(**bad)
    op = jj.custom_op(**scale_op(module))
    with pytest.raises(TypeError, match=r"x is int32, the kernels take float32"):
        op(jnp.ones((8,), jnp.int32), 1.0)
    with pytest.raises(TypeError, match=r"takes 2 arguments \(x, a\), got 1"):
        op(jnp.ones((8,), jnp.float32))


@pytest.fixture(scope="module")
def cpu_probe():
    """The handler registered for XLA's CPU platform under a test-only name: XLA itself then queries its metadata,
    builds real call frames and turns its errors into exceptions (the launch needs a GPU stream, which CPU lacks,
    so only what comes before it is exercised here)."""
    name = "jitbridge_test_cpu_probe"
    jax.ffi.register_ffi_target(name, jitbridge._core._xla_ffi_handler, platform="cpu", api_version=1)
    cpu = jax.devices("cpu")[0]  # also on a machine whose default backend is CUDA
    x = jax.device_put(jnp.arange(8, dtype=jnp.float32), cpu)

    def call(payload, **attrs):
        fn = jax.ffi.ffi_call(name, [jax.ShapeDtypeStruct((8,), jnp.float32)], vmap_method="sequential")
        with jax.default_device(cpu):
            return jax.block_until_ready(fn(x, **({"jitbridge": payload} if payload is not None else {}), **attrs))
    return call


def launch_payload(module, kernel="scale"):
    k = module.get_function("scale")
    entry = jcall.launch_entry(k, [("in", 0, (8,), "float32"), ("out", 0, (8,), "float32"), 2.0, 8], 1, 8, 0, "t")
    entry["kernel"] = kernel
    return jcall.encode_payload([entry])


def test_real_xla_calls_the_handler_and_raises_its_errors(module, cpu_probe):
    with pytest.raises(Exception, match=r"INVALID_ARGUMENT: jitbridge XLA FFI call: malformed payload"):
        cpu_probe("{not json")
    with pytest.raises(Exception, match=r"payload version 9"):
        cpu_probe('{"v": 9, "launches": []}')
    with pytest.raises(Exception, match=r"jitbridge XLA FFI call: kernel 'nope': .*scale"):
        cpu_probe(launch_payload(module, "nope"))
    with pytest.raises(Exception, match=r"jitbridge XLA FFI call: kernel 'nope': .*scale"):  # keyed: the same
        cpu_probe(launch_payload(module, "nope"), jitbridge_key=jcall.payload_key(launch_payload(module, "nope")))
    with pytest.raises(Exception, match=r"the attribute 'jitbridge_key' is not a string"):
        cpu_probe(launch_payload(module), jitbridge_key=3)
    with pytest.raises(Exception, match=r"no 'jitbridge' attribute"):
        cpu_probe(None, other="x")
    # A good payload gets as far as the device: the kernel is compiled and looked up, then either no driver is
    # found (jitbridge's error) or, with a driver, XLA's CPU context has no GPU stream (XLA's error).
    with pytest.raises(Exception, match=r"no CUDA driver|GPU|stream|context"):
        cpu_probe(launch_payload(module))


def test_prepare_refuses_a_bad_payload_naming_the_reason():
    with pytest.raises(RuntimeError, match=r"jitbridge XLA FFI call: malformed payload"):
        jitbridge._core._xla_ffi_prepare(b"{nope", 0)


def lowered_text(fn, *args):
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def test_custom_op_batch_rule_folds_the_batch_into_one_call(module):
    op = jj.custom_op(**scale_op(module), batch="x")
    xs = jnp.ones((5, 1000), jnp.float32)
    fn = jax.vmap(lambda x: op(x, 3.0))
    (p,) = ffi_payloads(fn, xs)
    assert p["launches"][0]["args"][3] == ["int", 5000]  # numel("x") of the batched array
    assert p["launches"][0]["grid"] == [(5000 + 255) // 256, 1, 1]
    assert jax.eval_shape(fn, xs).shape == (5, 1000)
    text = lowered_text(fn, xs)
    assert text.count(f"stablehlo.custom_call @{jj.TARGET}") == 1 and "stablehlo.while" not in text
    # vmap of vmap folds both batch dimensions; the batch axis may be any axis (vmap moves it to the front).
    (p,) = ffi_payloads(jax.vmap(jax.vmap(lambda x: op(x, 3.0)), in_axes=1), jnp.ones((7, 4, 3), jnp.float32))
    assert p["launches"][0]["args"][3] == ["int", 84]
    # The backward folds too (batch= names grad_y as well): vmap of grad is one call per phase. (The loss uses x
    # again so that grad_y differs per element: a cotangent the same for every element is not batched at all.)
    op = jj.custom_op(**scale_op(module), batch=("x", "grad_y"))
    grad = jax.vmap(jax.grad(lambda x: (op(x, 3.0) * x).sum()))
    payloads = ffi_payloads(grad, xs)
    assert [(l["kernel"], l["args"][3]) for p in payloads for l in p["launches"]] == [("scale", ["int", 5000]),
                                                                                       ("scale_grad", ["int", 5000])]
    assert "stablehlo.while" not in lowered_text(grad, xs)


def row_bias_op(module, batch):
    return jj.custom_op(
        inputs=("x", "b"), outputs={"y": jj.Output(like="x")},
        forward=jj.Launch(module.get_function("row_bias"), args=("x", "b", "y", jj.numel("x"), jj.size("x", -1)),
                          grid=lambda x: (x.numel() + 255) // 256, block=256),
        save=("x", "b"),
        backward=jj.Launch(module.get_function("row_bias_grad"),
                           args=("grad_y", "grad_x", "grad_b", jj.numel("grad_y"), jj.size("grad_y", -1)),
                           grid=1, block=256),
        grads={"x": jj.Output(like="grad_y"), "b": jj.Output(like="b")}, batch=batch)


def test_custom_op_batch_rule_only_where_every_batched_tensor_folds(module):
    op = row_bias_op(module, batch={"forward": ("x",)})
    xs, b = jnp.ones((5, 8, 16), jnp.float32), jnp.ones((16,), jnp.float32)
    # x batched, b not: one call over the batched x, b as it is.
    (p,) = ffi_payloads(jax.vmap(op, in_axes=(0, None)), xs, b)
    assert p["launches"][0]["args"][3:] == [["int", 640], ["int", 16]]
    # b batched too (not named): one call per element.
    bs = jnp.ones((5, 16), jnp.float32)
    text = lowered_text(jax.vmap(op), xs, bs)
    assert "stablehlo.while" in text
    (p,) = ffi_payloads(jax.vmap(op), xs, bs)
    assert p["launches"][0]["args"][3:] == [["int", 128], ["int", 16]]
    # The backward is not in batch=: per element, whereas the forward folds.
    grad = jax.vmap(jax.grad(lambda x, b: op(x, b).sum(), argnums=(0, 1)), in_axes=(0, None))
    gx, gb = jax.eval_shape(grad, xs, b)
    assert gx.shape == (5, 8, 16) and gb.shape == (5, 16)
    assert [l["args"][3] for p in ffi_payloads(grad, xs, b) for l in p["launches"]] == [["int", 640], ["int", 128]]
    # A named tensor without a batch dimension is broadcast to one when the call folds.
    both = row_bias_op(module, batch={"forward": ("x", "b")})
    (p,) = ffi_payloads(jax.vmap(both, in_axes=(0, None)), xs, b)
    assert p["launches"][0]["args"][3:] == [["int", 640], ["int", 16]]


def test_custom_op_batch_rule_that_does_not_fit_names_the_output(module):
    # grad_b sums over rows: folding the batch into grad_y's rows would sum over the batch too. Refused when traced.
    op = row_bias_op(module, batch=("x", "grad_y"))
    xs, b = jnp.ones((5, 8, 16), jnp.float32), jnp.ones((16,), jnp.float32)
    grad = jax.vmap(jax.grad(lambda x, b: op(x, b).sum(), argnums=(0, 1)), in_axes=(0, None))
    with pytest.raises(ValueError, match=r"backward: batch= folds .* but then grad_b is float32\[16\] where the "
                                         r"batch needs float32\[5, 16\]"):
        jax.make_jaxpr(grad)(xs, b)


def test_custom_op_batch_declaration_errors(module):
    with pytest.raises(jj.OpDeclarationError, match=r"batch= names 'nope', a tensor no phase takes"):
        jj.custom_op(**scale_op(module), batch=("x", "nope"))
    with pytest.raises(jj.OpDeclarationError, match=r"batch= has 'sideways'; its keys are the op's phases"):
        jj.custom_op(**scale_op(module), batch={"sideways": "x"})
    with pytest.raises(jj.OpDeclarationError, match=r"batch= forward: 'grad_y' is not a tensor the forward takes"):
        jj.custom_op(**scale_op(module), batch={"forward": "grad_y"})
    with pytest.raises(jj.OpDeclarationError, match=r"batch= takes a tensor name"):
        jj.custom_op(**scale_op(module), batch=3)


def test_traced_scalars_are_refused_naming_the_argument(module):
    k = module.get_function("scale")
    x = jnp.ones((1000,), jnp.float32)
    op = jj.custom_op(**scale_op(module))
    with pytest.raises(TypeError, match=r"scalar input 'a' \(float\) is a traced value \((f32|float32)\[\]\) .*"
                                        r"static_argnums.*declare it a Tensor input"):
        jax.jit(op).trace(x, 2.0)
    with pytest.raises(TypeError, match=r"scalar input 'a' \(float\) is a traced value"):
        jax.vmap(op)(jnp.ones((3, 8), jnp.float32), jnp.ones((3,), jnp.float32))
    with pytest.raises(TypeError, match=r"scale argument 2 \(float\) is a traced value \((f32|float32)\[\]\) "
                                        r".*static_argnums.*0-d array to a const pointer"):
        jax.jit(lambda x, a: scale_call(k, x, a)).trace(x, 2.0)
    # The way out for a traced scalar: a 0-d array into a const pointer, an operand of the call.
    by = module.get_function("scale_by")
    traced = jax.jit(lambda x, a: jj.kernel_call(by, x, jj.Out(like=x), a, x.size, grid=4, block=256))
    (p,) = ffi_payloads(traced, x, jnp.float32(2.0))
    assert p["launches"][0]["args"] == [["in", 0], ["out", 0], ["in", 1], ["int", 1000]]
    # Static (or concrete) scalars are numbers in the payload.
    (p,) = ffi_payloads(lambda x: jax.jit(op, static_argnums=1)(x, 2.5), x)
    assert p["launches"][0]["args"][2] == ["float", 2.5]
    four = jnp.float32(4.0)  # a concrete JAX scalar (made outside the trace)
    (p,) = ffi_payloads(lambda x: scale_call(k, x, four), x)
    assert p["launches"][0]["args"][2] == ["float", 4.0]
    (p,) = ffi_payloads(lambda x: op(x, np.float32(0.5)), x)
    assert p["launches"][0]["args"][2] == ["float", 0.5]


def test_custom_op_rules_from_the_expression_helpers(module):
    # The torch side's rule helpers (Check, cdiv, maximum, ...) are jitbridge.jax's too, evaluated on traced shapes.
    op = jj.custom_op(**scale_op(module, check=jj.Check(lambda x: x.dim() == 1, "x must be 1-D"),
                                 forward=jj.Launch(module.get_function("scale"), args=("x", "y", "a", jj.numel("x")),
                                                   grid=lambda x: jj.maximum(1, jj.cdiv(x.numel(), 256)),
                                                   block=256)))
    (p,) = ffi_payloads(lambda x: op(x, 2.0), jnp.ones((1000,), jnp.float32))
    assert p["launches"][0]["grid"] == [4, 1, 1]
    with pytest.raises(ValueError, match=r"x must be 1-D; got x \[4, 250\]"):
        op(jnp.ones((4, 250), jnp.float32), 2.0)
