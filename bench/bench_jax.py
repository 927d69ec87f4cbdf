"""bench_jax.py — jitbridge kernels inside jax.jit against native XLA, for issue 27's goals. (1) Per-call cost: a
jitted function calling one small jitbridge kernel (y = 2x, 1024 elements) against the same function with XLA's
own multiply (goal <= 1.1x). (2) Example 1's kernels inside jax.jit: forward and backward bandwidth over their
minimum traffic, against a jitted copy-like XLA op (x + 1) of the same size (goal >= 90 %). (3) Example 1's forward
+ backward step at 64M elements: the jitbridge op against the same computation in jax.numpy under jax.jit (goal
>= 1.5x faster). Variants are timed round-robin (one batch of each in turn, median over rounds); each is checked
against jax.numpy before it is timed. Needs a GPU, JAX with CUDA, PyTorch (the shared declaration in
examples/torch/ops.py). Prints tables."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import ROOT, gpu_jitbridge, print_table  # noqa: E402

SCALE = r'''
extern "C" __global__ void scale(const float* x, float* y, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i]; }
'''
ROUNDS = 30
CALL_GOAL, BANDWIDTH_GOAL, SPEEDUP_GOAL = 1.1, 0.90, 1.5


def round_robin(variants, batch, rounds=ROUNDS):
    """{name: median seconds per call} of each zero-argument callable (it returns something to wait on), timed in
    batches of ``batch`` calls, one batch of each variant in turn."""
    import jax
    times = {name: [] for name in variants}
    for fn in variants.values():  # compile and warm up
        jax.block_until_ready(fn())
    for _ in range(rounds):
        for name, fn in variants.items():
            start = time.perf_counter()
            for _ in range(batch):
                out = fn()
            jax.block_until_ready(out)
            times[name].append((time.perf_counter() - start) / batch)
    return {name: statistics.median(t) for name, t in times.items()}


def per_call(jax, jnp, jj, jitbridge):
    k = jitbridge.RawModule(code=SCALE).get_function("scale")
    x = jax.random.normal(jax.random.PRNGKey(0), (1024,), jnp.float32)
    ours = jax.jit(lambda x: jj.kernel_call(k, x, jj.Out(like=x), 2.0, x.size, grid=4, block=256))
    native = jax.jit(lambda x: x * 2.0)
    assert bool(jnp.array_equal(ours(x), native(x)))
    t = round_robin({"jitbridge": lambda: ours(x), "xla": lambda: native(x)}, batch=500)
    ratio = t["jitbridge"] / t["xla"]
    print_table("jax.jit per-call cost, y = 2x on 1024 float32 (host + device, back to back)",
                ["variant", "us/call", "vs XLA", "goal"],
                [["XLA multiply", f"{t['xla'] * 1e6:.2f}", "1.00x", ""],
                 ["jitbridge kernel_call", f"{t['jitbridge'] * 1e6:.2f}", f"{ratio:.2f}x",
                  f"<= {CALL_GOAL}x: {'met' if ratio <= CALL_GOAL else 'NOT met'}"]], key="jax_per_call")


def example1(jax, jnp, ex):
    n_rows, cols = 65536, 1024  # 64M elements
    k = jax.random.split(jax.random.PRNGKey(1), 3)
    x = jax.random.normal(k[0], (n_rows, cols), jnp.float32)
    bias = jax.random.normal(k[1], (cols,), jnp.float32)
    gy = jax.random.normal(k[2], (n_rows, cols), jnp.float32)

    def step(gelu):
        def f(x, bias, gy):
            y, vjp = jax.vjp(gelu, x, bias)
            return (y,) + vjp(gy)
        return jax.jit(f)

    fwd = jax.jit(ex.fused_bias_gelu)
    ours, ref = step(ex.fused_bias_gelu), step(ex.reference)
    copy = jax.jit(lambda x: x + 1.0)
    for a, b in zip(ours(x, bias, gy), ref(x, bias, gy)):
        assert bool(jnp.allclose(a, b, rtol=1e-3, atol=1e-2)), "the jitbridge op differs from jax.numpy"
    t = round_robin({"copy": lambda: copy(x), "fwd": lambda: fwd(x, bias), "ours": lambda: ours(x, bias, gy),
                     "ref": lambda: ref(x, bias, gy)}, batch=10)
    nbytes = x.size * 4
    copy_bw = 2 * nbytes / t["copy"]
    fwd_bw = 2 * nbytes / t["fwd"]                  # read x, write y
    step_bytes = 5 * nbytes                         # forward: x in, y out; backward: x, gy in, gx out (bias small)
    rows = [["XLA x + 1 (copy-like)", f"{t['copy'] * 1e3:.3f}", f"{copy_bw / 1e12:.2f}", "100 %", ""],
            ["jitbridge forward", f"{t['fwd'] * 1e3:.3f}", f"{fwd_bw / 1e12:.2f}", f"{fwd_bw / copy_bw:.0%}",
             f">= {BANDWIDTH_GOAL:.0%}: {'met' if fwd_bw / copy_bw >= BANDWIDTH_GOAL else 'NOT met'}"],
            ["jitbridge fwd+bwd", f"{t['ours'] * 1e3:.3f}", f"{step_bytes / t['ours'] / 1e12:.2f}",
             f"{step_bytes / t['ours'] / copy_bw:.0%}", ""],
            ["jax.numpy fwd+bwd", f"{t['ref'] * 1e3:.3f}", f"{step_bytes / t['ref'] / 1e12:.2f}",
             f"{step_bytes / t['ref'] / copy_bw:.0%}", ""]]
    print_table("Example 1 (bias + GELU) in jax.jit at 64M float32 elements: ms per call, TB/s over minimum traffic",
                ["variant", "ms", "TB/s", "of copy", "goal"], rows, key="jax_example1_bandwidth")
    speedup = t["ref"] / t["ours"]
    print_table("Example 1 forward + backward (jax.vjp) at 64M elements under jax.jit",
                ["jax.numpy ms", "jitbridge ms", "speed-up", "goal"],
                [[f"{t['ref'] * 1e3:.3f}", f"{t['ours'] * 1e3:.3f}", f"{speedup:.2f}x",
                  f">= {SPEEDUP_GOAL}x: {'met' if speedup >= SPEEDUP_GOAL else 'NOT met'}"]], key="jax_example1_step")


def main():
    jitbridge, jax, _ = gpu_jitbridge("bench_jax.py", "jax", "torch")  # torch: the shared declaration (ops.py)
    import jax.numpy as jnp
    import jaxlib
    import jitbridge.jax as jj
    print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, device {jax.devices()[0].device_kind}")
    per_call(jax, jnp, jj, jitbridge)
    sys.path.insert(0, os.path.join(ROOT, "examples", "jax"))
    import jax_bias_gelu as ex
    example1(jax, jnp, ex)


if __name__ == "__main__":
    main()
