"""fused_bias_gelu.py — a fused bias + GELU op with forward and backward kernels, used in a small model.

1. Correctness: forward and both gradients against the eager PyTorch composite F.gelu(x + bias, approximate="tanh").
2. Training: Linear -> fused_bias_gelu -> Linear learns a toy regression for a few steps; the loss goes down.
3. Speed: forward + backward at 64M elements against eager PyTorch and against the composite under torch.compile,
   per step started on an idle GPU (host time shows) and per step of a back-to-back loop (as in training).
   bench/bench_example1_processes.py repeats this in fresh processes.

The op itself is declared in ops.py (next to this file): kernels, argument mapping, shapes, backward.
"""
import os
import statistics
import time
from typing import NamedTuple, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from ops import fused_bias_gelu

ROWS, COLS = 65536, 1024   # the speed measurement's x: 64M float32 elements
SPEEDUP_GOAL = 1.6         # forward + backward against eager PyTorch (issue 15), both timings below
LOOP_STEPS = 10            # back-to-back steps per `loop` timing


def reference(x, bias):
    """What the op computes, in eager PyTorch: two kernels forward (add, gelu), a gelu backward and a sum back."""
    return F.gelu(x + bias, approximate="tanh")


def check_correctness():
    # Shapes that take each path of the kernels: 16-byte vector loads (C % 4 == 0), scalar loads (C = 5, C = 130),
    # more than two dimensions, and a bias that is a view starting 4 bytes into its storage (not 16-byte aligned).
    cases = [((1000, 768), 0), ((37, 5), 0), ((3, 2, 130), 0), ((64, 256), 1)]
    for shape, bias_offset in cases:
        x = torch.randn(shape, device="cuda", requires_grad=True)
        bias_storage = torch.randn(shape[-1] + bias_offset, device="cuda")
        bias = bias_storage[bias_offset:].detach().requires_grad_()
        grad_y = torch.randn(shape, device="cuda")

        y = fused_bias_gelu(x, bias)
        grad_x, grad_bias = torch.autograd.grad(y, (x, bias), grad_y)
        y_ref = reference(x, bias)
        grad_x_ref, grad_bias_ref = torch.autograd.grad(y_ref, (x, bias), grad_y)

        torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grad_x, grad_x_ref, rtol=1e-5, atol=1e-5)
        # grad_bias sums over all rows; float32 sums in a different order differ in the last bits.
        torch.testing.assert_close(grad_bias, grad_bias_ref, rtol=1e-4, atol=1e-4)
    print("correctness: forward, grad_x and grad_bias match eager PyTorch")


class FusedBiasGELU(nn.Module):
    """gelu(x + bias) with a learnable bias, through the jitbridge op."""

    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return fused_bias_gelu(x, self.bias)


def train_a_few_steps(steps=60):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 256, bias=False), FusedBiasGELU(256), nn.Linear(256, 1)).cuda()
    inputs = torch.randn(2048, 32, device="cuda")
    targets = torch.sin(inputs[:, :1]) + inputs[:, 1:2] ** 2
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        loss = F.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()          # runs the op's backward kernels
        optimizer.step()
        losses.append(loss.item())
    print(f"training: loss {losses[0]:.4f} -> {losses[-1]:.4f} in {steps} steps")
    assert losses[-1] < 0.5 * losses[0], losses
    assert model[1].bias.grad is not None and model[1].bias.grad.abs().sum() > 0


def forward_backward(fn, x, bias, grad_y):
    """One training step's worth of work: y = fn(x, bias), then the gradients of x and bias."""
    y = fn(x, bias)
    torch.autograd.grad(y, (x, bias), grad_y)


class Timing(NamedTuple):
    """One variant's forward + backward times (milliseconds, medians over the rounds; None when it could not run,
    with the reason in note)."""
    name: str
    step_ms: Optional[float]   # CUDA events around one step started after a synchronize: host latency visible
    loop_ms: Optional[float]   # CUDA events around LOOP_STEPS back-to-back steps, per step: a training loop
    host_ms: Optional[float]   # CPU time per step of those back-to-back steps (time to enqueue the work)
    note: str = ""


def time_step_ms(step):
    """Milliseconds from an idle GPU to the end of one step(), timed with CUDA events: the first launch waits
    for the host to get there, so host time before and between launches counts where the GPU waits for it."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def time_loop_ms(step, steps=LOOP_STEPS):
    """(GPU milliseconds per step, CPU milliseconds per step) over `steps` back-to-back step() calls with no
    synchronization between them, as in a training loop: when the host enqueues faster than the GPU runs, the
    GPU time is the kernels' alone."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    host = time.perf_counter()
    start.record()
    for _ in range(steps):
        step()
    end.record()
    host = time.perf_counter() - host
    end.synchronize()
    return start.elapsed_time(end) / steps, host * 1e3 / steps


def check_matches_eager(fn, x, bias, grad_y, expected):
    """Raises AssertionError unless fn's y, grad_x and grad_bias match ``expected`` (eager's three)."""
    y = fn(x, bias)
    got = (y, *torch.autograd.grad(y, (x, bias), grad_y))
    for what, g, e, tol in zip(("y", "grad_x", "grad_bias"), got, expected, (1e-4, 1e-4, 1e-3)):
        torch.testing.assert_close(g, e, rtol=tol, atol=tol, msg=lambda m, what=what: f"{what}: {m}")


def measure_speedups(rows=ROWS, cols=COLS, rounds=15, warmup=3, with_compile=True):
    """[Timing] for forward + backward on x [rows, cols] float32: eager PyTorch, the composite under torch.compile
    (unless with_compile is False) and the jitbridge op, last. Each variant's results are checked against eager's
    before it is timed. The variants take turns: per round, each runs one untimed step (the first step after
    another variant pays for that variant's memory traffic), three `step` timings and one `loop` timing of
    LOOP_STEPS steps; the medians over all rounds are reported. A variant that cannot run here gets None and the
    reason."""
    x = torch.randn(rows, cols, device="cuda", requires_grad=True)
    bias = torch.randn(cols, device="cuda", requires_grad=True)
    grad_y = torch.randn(rows, cols, device="cuda")
    y = reference(x, bias)
    expected = (y.detach(), *torch.autograd.grad(y, (x, bias), grad_y))
    del y
    variants = [("eager PyTorch: gelu(x + bias)", lambda: reference)]
    if with_compile:
        variants.append(("torch.compile(gelu(x + bias))", lambda: torch.compile(reference, fullgraph=True)))
    variants.append(("jitbridge op fused_bias_gelu", lambda: fused_bias_gelu))
    steps, failed = {}, {}
    for name, make in variants:
        try:
            fn = make()
            step = (lambda f: lambda: forward_backward(f, x, bias, grad_y))(fn)
            for _ in range(warmup):  # compiles (torch.compile) and fills the caching allocator
                step()
            check_matches_eager(fn, x, bias, grad_y, expected)
            torch.cuda.synchronize()
            steps[name] = step
        except Exception as e:  # torch.compile needs a working Triton/compiler toolchain
            failed[name] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:80] if str(e).strip() else ''}"
    del expected
    times = {name: {"step": [], "loop": [], "host": []} for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            step()
            times[name]["step"].extend(time_step_ms(step) for _ in range(3))
            loop, host = time_loop_ms(step)
            times[name]["loop"].append(loop)
            times[name]["host"].append(host)
    median = statistics.median
    return [Timing(name, median(times[name]["step"]), median(times[name]["loop"]), median(times[name]["host"]))
            if name in steps else Timing(name, None, None, None, failed[name]) for name, _ in variants]


def print_speedups(results, elements):
    eager = results[0]
    print(f"\nforward + backward, {elements / 2**20:.0f}M float32 elements, ms per step (medians): step = CUDA "
          f"events around one step started on an idle GPU; loop = per step of {LOOP_STEPS} back-to-back steps; "
          f"host = CPU time per step in that loop")

    def vs(eager_ms, ms):
        return f"{eager_ms / ms:5.2f}x" if eager_ms else "    -"

    for t in results:
        if t.step_ms is None:
            print(f"  {t.name:<32} n/a ({t.note})")
            continue
        print(f"  {t.name:<32} step {t.step_ms:7.3f} {vs(eager.step_ms, t.step_ms)} | loop {t.loop_ms:7.3f} "
              f"{vs(eager.loop_ms, t.loop_ms)} | host {t.host_ms:6.3f}")
    verdict = speedup_verdict(results)
    if verdict:
        print("  jitbridge speedup over eager: " + ", ".join(
            f"{kind} {ratio:.2f}x (goal >= {SPEEDUP_GOAL}x: {ok})" for kind, (ratio, ok) in verdict.items()))


def speedup_verdict(results):
    """{"step": (speedup, "ok" or "MISSED"), "loop": (...)}: the jitbridge op (the last result) against eager (the
    first) per measure_speedups' step and loop timings, judged against SPEEDUP_GOAL; None when either could not
    be timed."""
    eager, ours = results[0], results[-1]
    if eager.step_ms is None or ours.step_ms is None:
        return None
    verdict = {}
    for kind in ("step", "loop"):
        ratio = getattr(eager, f"{kind}_ms") / getattr(ours, f"{kind}_ms")
        verdict[kind] = (ratio, "ok" if ratio >= SPEEDUP_GOAL else "MISSED")
    return verdict


def main():
    check_correctness()
    train_a_few_steps()
    if os.environ.get("JITBRIDGE_SKIP_TIMING") == "1":  # scripts/gpu-sanitize: timings mean nothing there
        print("  timing skipped (JITBRIDGE_SKIP_TIMING=1)")
    else:
        print_speedups(measure_speedups(ROWS, COLS), ROWS * COLS)
    print("fused_bias_gelu: ok")


if __name__ == "__main__":
    main()
