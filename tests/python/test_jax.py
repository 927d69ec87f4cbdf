"""jitbridge.jax without a GPU: importing jitbridge never imports JAX; kernel_call's and custom_op's trace-time
checks; the custom calls they lower to (payload contents, one call per phase, grad and vmap structure), traced for
the CUDA platform. The GPU runs are in test_jax_gpu.py; the handler itself is tested in C++ (ctest c_api)."""
import json
import subprocess
import sys

import pytest

import jitbridge

SCALE = r'''
#include <jitbridge/tensor.cuh>
extern "C" __global__ void scale(const float* x, float* y, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i]; }
extern "C" __global__ void scale_grad(const float* gy, float* gx, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) gx[i] = a * gy[i]; }
extern "C" __global__ void in_place(float* x, long long n) {}
extern "C" __global__ void bad_copy(float* x, float* y) {}
extern "C" __global__ void view(jitbridge::Tensor<const float, 2> x, float* y) {}
'''


def test_import_jitbridge_does_not_import_jax():
    code = "import sys, jitbridge; import jitbridge.torch; assert 'jax' not in sys.modules, 'jax imported'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=None)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


jax = pytest.importorskip("jax", reason="JAX is not installed (the GPU machine has it; CI does not install it)")
jnp = pytest.importorskip("jax.numpy")
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
    entry = jj._launch_entry(k, [("in", 0, (8,), "float32"), ("out", 0, (8,), "float32"), 2.0, 8], 1, 8, 0, "t")
    entry["kernel"] = kernel
    return jj._payload([entry])


def test_real_xla_calls_the_handler_and_raises_its_errors(module, cpu_probe):
    with pytest.raises(Exception, match=r"INVALID_ARGUMENT: jitbridge XLA FFI call: malformed payload"):
        cpu_probe("{not json")
    with pytest.raises(Exception, match=r"payload version 9"):
        cpu_probe('{"v": 9, "launches": []}')
    with pytest.raises(Exception, match=r"jitbridge XLA FFI call: kernel 'nope': .*scale"):
        cpu_probe(launch_payload(module, "nope"))
    with pytest.raises(Exception, match=r"no 'jitbridge' attribute"):
        cpu_probe(None, other="x")
    # A good payload gets as far as the device: the kernel is compiled and looked up, then either no driver is
    # found (jitbridge's error) or, with a driver, XLA's CPU context has no GPU stream (XLA's error).
    with pytest.raises(Exception, match=r"no CUDA driver|GPU|stream|context"):
        cpu_probe(launch_payload(module))


def test_prepare_refuses_a_bad_payload_naming_the_reason():
    with pytest.raises(RuntimeError, match=r"jitbridge XLA FFI call: malformed payload"):
        jitbridge._core._xla_ffi_prepare(b"{nope", 0)
