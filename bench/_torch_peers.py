"""_torch_peers.py — example 1's fused bias + GELU op (examples/torch/ops.py) and the peers it is measured against
by bench_torch_op.py and bench_torch_modes.py: eager PyTorch, hand-written torch.library.custom_op and
torch.autograd.Function wrappers of the same kernels, jitbridge.torch.function, torch.compile; result checks
against eager and round-robin host timing."""
import os
import statistics
import sys
import threading
import time

from _table import ROOT

SMALL = (64, 64)   # x of the host-cost tables: launches so small that device time is negligible
JITBRIDGE_OP = "jitbridge.torch.custom_op"
JITBRIDGE_PYTHON = "jitbridge.torch.custom_op, Python runner"
EAGER = "eager PyTorch: gelu(x + bias)"


def python_runner_op(ops):
    """Example 1's op declared again (another name) with JITBRIDGE_TORCH_NATIVE=0: the same kernels and rules on
    the Python runner, next to the native one that ops.fused_bias_gelu uses when the torch add-on builds."""
    import jitbridge.torch as jt
    old = os.environ.get("JITBRIDGE_TORCH_NATIVE")
    os.environ["JITBRIDGE_TORCH_NATIVE"] = "0"
    try:
        return jt.custom_op("jitbridge_bench::fused_bias_gelu_python_runner", **ops.BIAS_GELU)
    finally:
        if old is None:
            del os.environ["JITBRIDGE_TORCH_NATIVE"]
        else:
            os.environ["JITBRIDGE_TORCH_NATIVE"] = old


def runner_line(ops):
    """Which runner example 1's op uses, and why (printed under the tables)."""
    import jitbridge.torch as jt
    return f"{JITBRIDGE_OP} runs on: {jt.runner(ops.fused_bias_gelu)!r}"


def load_ops():
    """examples/torch/ops.py (compiles its kernels on first import)."""
    d = os.path.join(ROOT, "examples", "torch")
    if d not in sys.path:
        sys.path.insert(0, d)
    import ops
    return ops


def eager_composite(torch):
    """gelu(x + bias) in eager PyTorch (a function of its own, so torch.compile of it caches apart from others)."""
    gelu = torch.nn.functional.gelu

    def eager(x, bias):
        return gelu(x + bias, approximate="tanh")
    return eager


def bare_kernels(torch, ops):
    """(forward(x, bias) -> y, backward(x, bias, grad_y) -> (grad_x, grad_bias)): example 1's float32 kernels
    launched directly (outputs from torch.empty_like), as a hand-written wrapper would launch them."""
    fwd = ops.per_dtype(ops.gelu_module, "bias_gelu_fwd")["float32"]
    bwd = ops.per_dtype(ops.gelu_module, "bias_gelu_bwd")["float32"]
    reduce = ops.per_dtype(ops.gelu_module, "bias_grad_reduce")["float32"]

    def forward(x, bias):
        y = torch.empty_like(x)
        fwd(ops.blocks(x.numel(), 1024), 256, (x, bias, y, x.numel(), x.shape[-1]))
        return y

    def backward(x, bias, grad_y):
        cols, row_blocks = x.shape[-1], ops.row_blocks(x)
        apart = ops.reduced_apart(x)
        grad_x, grad_bias = torch.empty_like(x), torch.empty_like(bias)
        partial = torch.empty((row_blocks * apart, cols), device=x.device, dtype=x.dtype)
        bwd((ops.blocks(cols, 4 * ops.BWD_THREADS), row_blocks), ops.BWD_THREADS,
            (x, bias, grad_y, grad_x, partial, grad_bias, ops.rows_of(x), cols))
        if apart:
            reduce(ops.blocks(cols, 32), (32, 16), (partial, grad_bias, row_blocks, cols))
        return grad_x, grad_bias
    return forward, backward


def hand_custom_op(torch, forward, backward):
    """A hand-written torch.library.custom_op (+ register_fake, register_autograd) around the bare kernels."""
    @torch.library.custom_op("jitbridge_bench::bias_gelu_by_hand", mutates_args=())
    def op(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return forward(x, bias)

    @torch.library.custom_op("jitbridge_bench::bias_gelu_by_hand_backward", mutates_args=())
    def op_backward(x: torch.Tensor, bias: torch.Tensor, grad_y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return backward(x, bias, grad_y.contiguous())

    op.register_fake(lambda x, bias: torch.empty_like(x))
    op_backward.register_fake(lambda x, bias, grad_y: (torch.empty_like(x), torch.empty_like(bias)))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def grad(ctx, grad_y):
        x, bias = ctx.saved_tensors
        return op_backward(x, bias, grad_y)

    op.register_autograd(grad, setup_context=setup_context)
    return op


def hand_function(torch, forward, backward, record=None):
    """A hand-written torch.autograd.Function around the bare kernels; returns its apply. With ``record`` (a list),
    each backward appends (perf_counter_ns at its start, at its end, the thread's id)."""
    class ByHand(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, bias):
            ctx.save_for_backward(x, bias)
            return forward(x, bias)

        @staticmethod
        def backward(ctx, grad_y):
            if record is None:
                x, bias = ctx.saved_tensors
                return backward(x, bias, grad_y.contiguous())
            start = time.perf_counter_ns()
            x, bias = ctx.saved_tensors
            grads = backward(x, bias, grad_y.contiguous())
            record.append((start, time.perf_counter_ns(), threading.get_ident()))
            return grads
    return ByHand.apply


def null_function(torch):
    """A torch.autograd.Function that launches nothing (empty outputs): the floor of any Python-defined op."""
    class Null(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, bias):
            return torch.empty_like(x)

        @staticmethod
        def backward(ctx, grad_y):
            return torch.empty_like(grad_y), torch.empty((grad_y.shape[-1],), device=grad_y.device)
    return Null.apply


def jitbridge_function(ops):
    """Example 1's declaration as a jitbridge.torch.function."""
    import jitbridge.torch as jt
    return jt.function(name="bias_gelu (function)", **ops.BIAS_GELU)


def describe(e):
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"[:100]


def peers(torch, ops, names=None):
    """([(name, fn(x, bias), checked)], [(name, reason)]): example 1's op and its peers, in table order; a peer
    that cannot be built is in the second list. ``checked``: False for the null Function (its results are
    garbage). ``names``: only those."""
    makers = [(EAGER, lambda: eager_composite(torch)),
              (JITBRIDGE_OP, lambda: ops.fused_bias_gelu),
              (JITBRIDGE_PYTHON, lambda: python_runner_op(ops)),
              ("jitbridge.torch.function", lambda: jitbridge_function(ops)),
              ("hand-written torch.library.custom_op", lambda: hand_custom_op(torch, *bare_kernels(torch, ops))),
              ("hand-written torch.autograd.Function", lambda: hand_function(torch, *bare_kernels(torch, ops))),
              ("torch.compile(fullgraph=True) of eager",
               lambda: torch.compile(eager_composite(torch), fullgraph=True)),
              ("null torch.autograd.Function (no kernels)", lambda: null_function(torch))]
    made, failed = [], []
    for name, make in makers:
        if names is not None and name not in names:
            continue
        try:
            made.append((name, make(), not name.startswith("null")))
        except Exception as e:
            failed.append((name, f"n/a ({describe(e)})"))
    return made, failed


def small_inputs(torch, shape=SMALL):
    """(x, bias, grad_y) float32 on the GPU, x and bias requiring grad."""
    x = torch.randn(shape, device="cuda", requires_grad=True)
    bias = torch.randn(shape[-1], device="cuda", requires_grad=True)
    return x, bias, torch.randn(shape, device="cuda")


def check_matches_eager(torch, fn, x, bias, grad_y):
    """Runs fn forward and backward and raises AssertionError unless y, grad_x and grad_bias match eager's."""
    y = fn(x, bias)
    grads = torch.autograd.grad(y, (x, bias), grad_y)
    expected = eager_composite(torch)(x, bias)
    expected_grads = torch.autograd.grad(expected, (x, bias), grad_y)
    for what, got, want in (("y", y, expected), ("grad_x", grads[0], expected_grads[0]),
                            ("grad_bias", grads[1], expected_grads[1])):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m, what=what: f"{what}: {m}")


def checked(torch, variants, x, bias, grad_y, warmup=3):
    """(the variants whose results match eager after ``warmup`` runs, [(name, reason)] for the others)."""
    good, failed = [], []
    for name, fn, check in variants:
        try:
            for _ in range(warmup):
                torch.autograd.grad(fn(x, bias), (x, bias), grad_y)
            if check:
                check_matches_eager(torch, fn, x, bias, grad_y)
            torch.cuda.synchronize()
            good.append((name, fn, check))
        except Exception as e:
            failed.append((name, f"n/a ({describe(e)})"))
    return good, failed


def round_robin_us(torch, steps, batch, rounds):
    """({name: [microseconds per call, one per round]}, {name: reason}) for each ``steps`` {name: step()}: per
    round, a batch of ``batch`` calls of each step in turn (after a synchronize, so each batch starts with the
    GPU idle), timed with the CPU clock. A step that raises is dropped with the reason."""
    samples, failed = {name: [] for name in steps}, {}
    for _ in range(rounds):
        for name, step in steps.items():
            if name in failed:
                continue
            try:
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(batch):
                    step()
                samples[name].append((time.perf_counter() - start) * 1e6 / batch)
            except Exception as e:
                failed[name] = f"n/a ({describe(e)})"
    torch.cuda.synchronize()
    return {n: v for n, v in samples.items() if n not in failed and v}, failed


def median_min(values):
    return statistics.median(values), min(values)
