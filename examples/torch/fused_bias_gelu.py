"""fused_bias_gelu.py — a fused bias + GELU op with forward and backward kernels, used in a small model.

1. Correctness: forward and both gradients against the eager PyTorch composite F.gelu(x + bias, approximate="tanh").
2. Training: Linear -> fused_bias_gelu -> Linear learns a toy regression for a few steps; the loss goes down.
3. Speed: forward + backward at 64M elements against eager PyTorch and against the composite under torch.compile.

The op itself is declared in ops.py (next to this file): kernels, argument mapping, shapes, backward.
"""
import os
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F

from ops import fused_bias_gelu

ROWS, COLS = 65536, 1024   # the speed measurement's x: 64M float32 elements
SPEEDUP_GOAL = 1.5         # forward + backward against eager PyTorch


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


def time_ms(step):
    """Milliseconds one call of step() takes on the GPU, timed with CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def measure_speedups(rows=ROWS, cols=COLS, rounds=15, warmup=3):
    """[(variant, milliseconds or None, note)] for forward + backward on x [rows, cols] float32: eager PyTorch, the
    composite under torch.compile, and the jitbridge op. The variants take turns (per round: one untimed step,
    then three timed ones; the median over all rounds), so a slower or faster patch of the machine hits them
    alike. A variant that cannot run
    here gets None and the reason."""
    x = torch.randn(rows, cols, device="cuda", requires_grad=True)
    bias = torch.randn(cols, device="cuda", requires_grad=True)
    grad_y = torch.randn(rows, cols, device="cuda")
    variants = [("eager PyTorch: gelu(x + bias)", lambda: reference),
                ("torch.compile(gelu(x + bias))", lambda: torch.compile(reference, fullgraph=True)),
                ("jitbridge op fused_bias_gelu", lambda: fused_bias_gelu)]
    steps, failed = {}, {}
    for name, make in variants:
        try:
            fn = make()
            step = (lambda f: lambda: forward_backward(f, x, bias, grad_y))(fn)
            for _ in range(warmup):  # compiles (torch.compile) and fills the caching allocator
                step()
            torch.cuda.synchronize()
            steps[name] = step
        except Exception as e:  # torch.compile needs a working Triton/compiler toolchain
            failed[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
    times = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            step()  # untimed: the first step after another variant pays for that variant's memory traffic
            times[name].extend(time_ms(step) for _ in range(3))
    return [(name, statistics.median(times[name]), "") if name in steps else (name, None, failed[name])
            for name, _ in variants]


def print_speedups(results, elements):
    eager = results[0][1]
    print(f"\nforward + backward, {elements / 2**20:.0f}M float32 elements (median of CUDA-event timings)")
    for name, ms, note in results:
        if ms is None:
            print(f"  {name:<34} n/a ({note})")
        else:
            print(f"  {name:<34} {ms:8.3f} ms   {eager / ms:5.2f}x vs eager")
    verdict = speedup_verdict(results)
    if verdict:
        print(f"  jitbridge speedup over eager: {verdict[0]:.2f}x (goal >= {SPEEDUP_GOAL}x: {verdict[1]})")


def speedup_verdict(results):
    """(the jitbridge op's speedup over eager, "ok" or "MISSED" against SPEEDUP_GOAL) from measure_speedups'
    results, or None when either could not be timed."""
    eager, ours = results[0][1], results[-1][1]
    if not (eager and ours):
        return None
    return eager / ours, "ok" if eager / ours >= SPEEDUP_GOAL else "MISSED"


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
