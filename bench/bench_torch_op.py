"""bench_torch_op.py — eager host microseconds per call of a 2-input op c = a + b (32 elements, so launches are
tiny) declared with jitbridge.torch, against the same launch bare and wrapped by hand in torch.library.custom_op
and torch.autograd.Function; then example 1's forward+backward times at 64M elements (eager PyTorch,
torch.compile, the jitbridge op). Variants are measured round-robin (one batch of each in turn, many rounds) so
drift on a shared machine hits them alike. Needs a GPU and PyTorch; prints tables."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import ROOT, print_table, use_jitbridge  # noqa: E402

SRC = r'''
extern "C" __global__ void add(const float* a, const float* b, float* c, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
'''
BATCH, ROUNDS, N = 200, 40, 32
OVERHEAD_GOAL = 1.0   # (jitbridge op - bare) / (hand-written custom_op - bare)


def batch_us(call):
    """A function timing BATCH calls of ``call``; returns microseconds per call."""
    def run():
        start = time.perf_counter()
        for _ in range(BATCH):
            call()
        return (time.perf_counter() - start) * 1e6 / BATCH
    return run


def overhead_variants(torch, jitbridge):
    """[(name, call)] for the five ways of running the add kernel, and [(name, reason)] for those unavailable.
    Failures of jitbridge's own variants propagate; a failing hand-written peer is reported."""
    import jitbridge.torch as jt
    from jitbridge.torch import Launch, Output, numel

    kernel = jitbridge.RawKernel(SRC, "add")
    a, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")

    def bare(a, b):
        c = torch.empty_like(a)
        n = a.numel()
        kernel((n + 255) // 256, 256, (a, b, c, n))
        return c

    declaration = dict(inputs=("a", "b"), outputs={"c": Output(like="a")},
                       forward=Launch(kernel, args=("a", "b", "c", numel("a")),
                                      grid=lambda a: (a.numel() + 255) // 256, block=256))
    jitbridge_op = jt.custom_op("jitbridge_bench::add", **declaration)
    jitbridge_function = jt.function(name="add", **declaration)
    variants = [("(a) bare jitbridge launch + torch.empty_like", lambda: bare(a, b)),
                ("(b) jitbridge.torch.custom_op", lambda: jitbridge_op(a, b))]
    unavailable = []
    try:
        @torch.library.custom_op("jitbridge_bench::add_by_hand", mutates_args=())
        def by_hand(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return bare(a, b)

        by_hand.register_fake(lambda a, b: torch.empty_like(a))
        variants.append(("(c) hand-written torch.library.custom_op", lambda: by_hand(a, b)))
    except Exception as e:
        unavailable.append(("(c) hand-written torch.library.custom_op", f"n/a ({type(e).__name__}: {e})"[:90]))

    class ByHand(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return bare(a, b)

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    variants += [("(d) hand-written torch.autograd.Function", lambda: ByHand.apply(a, b)),
                 ("(e) jitbridge.torch.function", lambda: jitbridge_function(a, b))]
    expected = a + b
    for name, call in variants:    # every variant computes the same thing before anything is timed
        torch.testing.assert_close(call(), expected, msg=lambda m, name=name: f"{name}: {m}")
    return variants, unavailable


def measure_overheads(torch, variants):
    """{name: median microseconds per call} over ROUNDS round-robin rounds of BATCH calls each."""
    runs = [(name, batch_us(call)) for name, call in variants]
    samples = {name: [] for name, _ in runs}
    for _ in range(ROUNDS):
        for name, run in runs:
            torch.cuda.synchronize()
            samples[name].append(run())
    torch.cuda.synchronize()
    return {name: statistics.median(v) for name, v in samples.items()}


def overhead_table(medians, unavailable):
    names = list(medians)
    bare = medians[names[0]]
    rows = [[name, f"{us:.2f}", "" if i == 0 else f"{us - bare:+.2f}"] for i, (name, us) in enumerate(medians.items())]
    rows += [[name, why, ""] for name, why in unavailable]
    print_table(f"Eager host time per forward call, c = a + b on {N} float32 elements: median over {ROUNDS} "
                f"round-robin rounds of {BATCH} calls", ["variant", "us/call", "vs (a)"], rows)
    ours, hand = medians.get("(b) jitbridge.torch.custom_op"), medians.get("(c) hand-written torch.library.custom_op")
    if ours is not None and hand is not None and hand > bare:
        ratio = (ours - bare) / (hand - bare)
        verdict = "ok" if ratio <= OVERHEAD_GOAL else "MISSED"
        print(f"(b - a) / (c - a) = {ratio:.2f}x: what the jitbridge op adds over a bare launch, relative to a "
              f"hand-written custom_op (goal: jitbridge op adds no more than the hand-written custom_op, "
              f"<= {OVERHEAD_GOAL}x: {verdict})")
    function = medians.get("(e) jitbridge.torch.function")
    by_hand = medians.get("(d) hand-written torch.autograd.Function")
    if function is not None and by_hand is not None and by_hand > bare:
        print(f"(e - a) / (d - a) = {(function - bare) / (by_hand - bare):.2f}x: the same for jitbridge.torch.function "
              f"against a hand-written torch.autograd.Function")


def speedup_table():
    """Example 1 at 64M elements; returns False when the jitbridge op itself failed."""
    sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))
    import fused_bias_gelu

    rows, cols = fused_bias_gelu.ROWS, fused_bias_gelu.COLS
    results = fused_bias_gelu.measure_speedups(rows, cols)
    eager = results[0][1]
    table = []
    for name, ms, note in results:
        if ms is None:
            table.append([name, f"n/a ({note})", ""])
        else:
            table.append([name, f"{ms:.3f}", f"{eager / ms:.2f}x" if eager else ""])
    print_table(f"Example 1, fused bias + GELU: forward + backward on x [{rows}, {cols}] float32 "
                f"({rows * cols / 2**20:.0f}M elements), median of CUDA-event timings",
                ["variant", "ms", "speedup vs eager"], table)
    verdict = fused_bias_gelu.speedup_verdict(results)
    if verdict:
        print(f"jitbridge op vs eager PyTorch: {verdict[0]:.2f}x (goal >= {fused_bias_gelu.SPEEDUP_GOAL}x: "
              f"{verdict[1]})")
    return results[-1][1] is not None


def main():
    print(f"bench_torch_op: measuring {use_jitbridge()}")
    import jitbridge
    if not jitbridge.driver_info()["devices"]:
        print("bench_torch_op: no GPU here; nothing to measure")
        return 0
    try:
        import torch
    except ImportError:
        print("bench_torch_op: no GPU here; nothing to measure (PyTorch is not installed)")
        return 0
    variants, unavailable = overhead_variants(torch, jitbridge)
    overhead_table(measure_overheads(torch, variants), unavailable)
    return 0 if speedup_table() else 1


if __name__ == "__main__":
    sys.exit(main())
