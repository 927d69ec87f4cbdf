"""jitbridge.jax on the GPU: kernel_call eagerly and under jax.jit, example 1's op (the torch declaration) under jit,
grad (against jax.numpy and jax.test_util.check_grads), vmap (per element and by custom_op's batch= rule), a launch
failure raised as an exception (and the process still working), command buffers on, JAX's persistent compilation
cache reused by a second process, and inputs on a second GPU when there is one. Inputs are fresh random data;
results are compared element by element with jax.numpy (results are fresh XLA buffers: an element a kernel forgets
to write holds whatever was there)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.gpu]
# Before JAX starts its backend: no 75 % preallocation, so torch tests in this process and the child processes
# below (each its own JAX) have GPU memory too.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
jax = pytest.importorskip("jax", reason="JAX is not installed")
import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import jitbridge  # noqa: E402
import jitbridge.jax as jj  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

SCALE = r'''
extern "C" __global__ void scale(const float* x, float* y, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i]; }
extern "C" __global__ void scale_grad(const float* gy, float* gx, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) gx[i] = a * gy[i]; }
extern "C" __global__ void scale_by(const float* x, float* y, const float* a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = *a * x[i]; }
'''


def cuda_devices():
    try:
        return jax.devices("cuda")
    except RuntimeError:
        return []


@pytest.fixture(scope="module", autouse=True)
def jax_gpu():
    if not cuda_devices():
        pytest.skip("JAX has no CUDA backend here (jax[cuda] not installed)")


@pytest.fixture(scope="module")
def module():
    return jitbridge.RawModule(code=SCALE)


@pytest.fixture(scope="module")
def example():
    pytest.importorskip("torch", reason="examples/torch/ops.py (the shared declaration) needs PyTorch")
    sys.path.insert(0, str(ROOT / "examples" / "jax"))
    import jax_bias_gelu
    return jax_bias_gelu


def scale_call(k, x, a):
    return jj.kernel_call(k, x, jj.Out(like=x), a, x.size, grid=(x.size + 255) // 256, block=256)


def random(shape, seed, dtype=jnp.float32):
    return jax.random.normal(jax.random.PRNGKey(seed), shape, dtype)


@pytest.mark.parametrize("n", [1, 1000, 1 << 20])
def test_kernel_call_eager_and_jit(module, n):
    k = module.get_function("scale")
    x = random((n,), n)
    np.testing.assert_array_equal(np.asarray(scale_call(k, x, 2.5)), np.asarray(x) * np.float32(2.5))
    jitted = jax.jit(lambda x: scale_call(k, x, -3.0) + 1.0)
    for seed in range(3):  # the compiled program again, on other data
        x = random((n,), 100 + seed)
        np.testing.assert_allclose(np.asarray(jitted(x)), np.asarray(x) * np.float32(-3.0) + 1.0, rtol=1e-6,
                                   atol=1e-6)


def test_traced_scalar_read_on_the_device(module):
    # A traced scalar cannot be a by-value argument; as a 0-d array into a const pointer it is read by the kernel:
    # one compiled program for every value.
    k = module.get_function("scale_by")
    f = jax.jit(lambda x, a: jj.kernel_call(k, x, jj.Out(like=x), a, x.size, grid=(x.size + 255) // 256, block=256))
    x = random((5000,), 30)
    for a in (0.5, -3.0, 7.25):
        np.testing.assert_array_equal(np.asarray(f(x, jnp.float32(a))), np.asarray(x) * np.float32(a))
    assert f._cache_size() == 1


def test_kernel_call_launch_failure_is_an_exception_and_the_process_goes_on(module):
    k = module.get_function("scale")
    x = random((1000,), 1)
    bad = jax.jit(lambda x: jj.kernel_call(k, x, jj.Out(like=x), 1.0, x.size, grid=1, block=4096))
    with pytest.raises(Exception, match=r"jitbridge XLA FFI call: .*block"):
        jax.block_until_ready(bad(x))
    np.testing.assert_array_equal(np.asarray(scale_call(k, x, 2.0)), np.asarray(x) * np.float32(2.0))


def test_kernel_call_vmap(module):
    k = module.get_function("scale")
    xs = random((4, 3000), 2)
    out = jax.jit(jax.vmap(lambda x: scale_call(k, x, 0.5)))(xs)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(xs) * np.float32(0.5))


def scale_op_declaration(module):
    return dict(
        inputs=("x", "a: float"), outputs={"y": jj.Output(like="x")},
        forward=jj.Launch(module.get_function("scale"), args=("x", "y", "a", jj.numel("x")),
                          grid=lambda x: (x.numel() + 255) // 256, block=256),
        backward=jj.Launch(module.get_function("scale_grad"), args=("grad_y", "grad_x", "a", jj.numel("grad_y")),
                           grid=lambda grad_y: (grad_y.numel() + 255) // 256, block=256),
        grads={"x": jj.Output(like="grad_y")})


def scale_op(module):
    return jj.custom_op(**scale_op_declaration(module))


def test_custom_op_grad_and_check_grads(module):
    op = scale_op(module)
    x = random((5000,), 3)
    w = random((5000,), 4)
    g = jax.jit(jax.grad(lambda x: jnp.sum(op(x, 1.5) * w)))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(w) * 1.5, rtol=1e-6)
    check_grads(lambda x: op(x, 1.5), (random((300,), 5),), order=1, modes=("rev",))


def test_example_op_forward_jit_grad_vmap(example):
    x, bias = random((300, 1000), 6), random((1000,), 7)
    op, ref = example.fused_bias_gelu, example.reference
    np.testing.assert_allclose(np.asarray(op(x, bias)), np.asarray(ref(x, bias)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jax.jit(op)(x, bias)), np.asarray(ref(x, bias)), rtol=1e-5, atol=1e-5)
    w = random((300, 1000), 8)
    grads = jax.jit(jax.grad(lambda x, b: jnp.sum(op(x, b) * w), argnums=(0, 1)))(x, bias)
    expected = jax.grad(lambda x, b: jnp.sum(ref(x, b) * w), argnums=(0, 1))(x, bias)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
    xs = random((3, 50, 1000), 11)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(op, in_axes=(0, None)))(xs, bias)),
                               np.asarray(ref(xs, bias)), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="bias must have shape"):
        op(x, random((7,), 12))


def test_custom_op_batch_rule_under_vmap_and_grad(module):
    # batch= folds vmap's batch into the kernels' element count: one call per phase, results as jax.numpy's.
    op = jj.custom_op(**scale_op_declaration(module), batch=("x", "grad_y"))
    xs, ws = random((6, 7000), 21), random((6, 7000), 22)
    out = jax.jit(jax.vmap(lambda x: op(x, 1.25)))(xs)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(xs) * np.float32(1.25))
    out = jax.jit(jax.vmap(jax.vmap(lambda x: op(x, -2.0)), in_axes=1, out_axes=1))(xs.reshape(6, 7, 1000))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(xs).reshape(6, 7, 1000) * np.float32(-2.0))
    grads = jax.jit(jax.vmap(jax.grad(lambda x, w: jnp.sum(op(x, 1.5) * w * x))))(xs, ws)
    np.testing.assert_allclose(np.asarray(grads), 2 * 1.5 * np.asarray(ws) * np.asarray(xs), rtol=1e-5, atol=1e-5)


def test_example_op_vmap_of_grad(example):
    # The example folds the forward (batch=) and runs the backward per element: per-element bias gradients.
    op, ref = example.fused_bias_gelu, example.reference
    xs, bias, ws = random((4, 30, 500), 23), random((500,), 24), random((4, 30, 500), 25)

    def grads(f):
        return jax.jit(jax.vmap(jax.grad(lambda x, b, w: jnp.sum(f(x, b) * w), argnums=(0, 1)),
                                in_axes=(0, None, 0)))(xs, bias, ws)
    for got, want in zip(grads(op), grads(ref)):
        assert got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)


def test_example_op_check_grads_float64(example, tmp_path):
    # float64 (the op's double kernels): check_grads' finite differences are too coarse in float32. JAX_ENABLE_X64
    # is read at start-up, hence a process of its own.
    code = f"""
import sys, jax, jax.numpy as jnp
sys.path.insert(0, {str(ROOT / "examples" / "jax")!r})
import jax_bias_gelu as ex
from jax.test_util import check_grads
for seed in range(3):
    k = jax.random.split(jax.random.PRNGKey(seed))
    x, b = jax.random.normal(k[0], (64, 96), jnp.float64), jax.random.normal(k[1], (96,), jnp.float64)
    assert ex.fused_bias_gelu(x, b).dtype == jnp.float64
    check_grads(ex.fused_bias_gelu, (x, b), order=1, modes=("rev",))
    check_grads(jax.jit(ex.fused_bias_gelu), (x, b), order=1, modes=("rev",))
print("check_grads ok")
"""
    assert "check_grads ok" in run_python(code, {"JAX_ENABLE_X64": "1"}, tmp_path)


def test_example_training_loop_matches_jax_numpy(example):
    ours, ref = example.train(example.fused_bias_gelu, steps=20), example.train(example.reference, steps=20)
    np.testing.assert_allclose(ours, ref, rtol=1e-4)
    assert ours[-1] < ours[0]


def run_python(code, env_extra, cwd):
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", **env_extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(jitbridge.__file__).parents[1]),
                                                     env.get("PYTHONPATH", "")] if p)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         cwd=cwd, timeout=300)
    assert out.returncode == 0, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr[-4000:]}"
    return out.stdout


PROGRAM = '''
import json, jax, jax.numpy as jnp, numpy as np, jitbridge, jitbridge.jax as jj
SRC = {src!r}
m = jitbridge.RawModule(code=SRC)
k, kg = m.get_function("scale"), m.get_function("scale_grad")
@jax.jit
def f(x):
    y = jj.kernel_call(k, x, jj.Out(like=x), 2.0, x.size, grid=(x.size + 255) // 256, block=256)
    z = jj.kernel_call(kg, y, jj.Out(like=y), 3.0, y.size, grid=(y.size + 255) // 256, block=256)
    return z + 1.0
ok = True
for seed in range(5):
    x = jax.random.normal(jax.random.PRNGKey(seed), (100000,), jnp.float32)
    ok = ok and bool(np.allclose(np.asarray(f(x)), np.asarray(x) * 6.0 + 1.0, rtol=1e-5, atol=1e-5))
print(json.dumps({{"ok": ok}}))
'''


def test_command_buffers_on(tmp_path):
    flags = "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"
    out = run_python(PROGRAM.format(src=SCALE), {"XLA_FLAGS": flags}, tmp_path)
    assert json.loads(out.strip().splitlines()[-1]) == {"ok": True}


def test_persistent_compilation_cache_reused_by_a_second_process(tmp_path):
    cache = tmp_path / "jax-cache"
    code = ('import jax\njax.config.update("jax_compilation_cache_dir", %r)\n'
            'jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)\n'
            'jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)\n' % str(cache)) \
        + PROGRAM.format(src=SCALE)
    fresh = {"JITBRIDGE_CACHE_DIR": str(tmp_path / "jb-cache")}
    out = run_python(code, fresh, tmp_path)
    assert json.loads(out.strip().splitlines()[-1]) == {"ok": True}
    entries = sorted(p.name for p in cache.rglob("*") if p.is_file())
    assert entries, "the first process stored nothing in JAX's persistent cache"
    # A new process, a new (empty) jitbridge cache: the program comes from JAX's cache, the kernels are rebuilt from
    # the payload's source.
    fresh = {"JITBRIDGE_CACHE_DIR": str(tmp_path / "jb-cache-2")}
    out = run_python(code, fresh, tmp_path)
    assert json.loads(out.strip().splitlines()[-1]) == {"ok": True}
    assert sorted(p.name for p in cache.rglob("*") if p.is_file()) == entries, "the second process compiled again"


def test_inputs_on_a_second_gpu(module):
    devices = cuda_devices()
    if len(devices) < 2:
        pytest.skip("one GPU")
    k = module.get_function("scale")
    for d in devices[:2]:
        x = jax.device_put(random((10000,), 13), d)
        y = jax.jit(lambda x: scale_call(k, x, 2.0))(x)
        assert y.devices() == {d}
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x) * np.float32(2.0))
