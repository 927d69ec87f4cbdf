"""gpt.py — a small GPT-style transformer trained with jitbridge kernels, against the same model in eager PyTorch.

Each block is: layer norm -> causal self-attention -> residual, layer norm -> MLP (Linear, bias + GELU, Linear) ->
residual. In the jitbridge model the layer norms (each with the residual add and linear bias before it), the
attention's scale + causal mask + softmax and the MLP's bias + GELU are jitbridge ops with backward kernels
(gpt_ops.py, ops.py); matrix products stay with torch (cuBLAS).
The eager model computes the same with F.layer_norm, masked softmax and F.gelu; both start from the same weights.

1. Loss curves: both models train for STEPS steps (AdamW, same seed, same batches of tokens from a fixed random
   bigram table, so there is something to learn); the losses must agree within LOSS_TOLERANCE at every step
   (float32; the kernels sum in other orders than torch's, so the curves drift apart by rounding only).
2. Step time (forward + backward + optimizer step), at a small host-bound size and a large device-bound size:
   eager, jitbridge, torch.compile of each model. Timed as a training loop runs: STEPS_TIMED steps back to back
   between two CUDA events (device time per step) with a CPU timer beside them (host time per step), the variants
   taking turns (in reverse order every other round); medians over the ROUNDS rounds. A speedup is the median of
   the per-round ratios of two variants (paired, so that the host's drift between rounds cancels), as
   bench/bench_launch.py judges its goals. Matrix products use TF32 tensor cores while timing, as training in
   float32 usually does (``--fp32-matmul`` turns that off); the loss comparison runs them in full float32.

Run: python3 examples/torch/gpt.py [--steps N] [--sizes small,large] [--json PATH] [--plot PATH]
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_ops import add_layer_norm, causal_softmax, layer_norm  # noqa: E402
from ops import fused_bias_gelu  # noqa: E402

STEPS = 300
LOSS_TOLERANCE = 2e-3        # max |loss(jitbridge) - loss(eager)| over all steps
SIZES = {   # name: (layers, width, heads, sequence, batch, vocabulary)
    "small": (2, 128, 4, 64, 8, 512),
    "large": (4, 512, 8, 1024, 8, 4096),
}
ROUNDS, STEPS_TIMED = 15, 10


class Block(nn.Module):
    def __init__(self, width, heads, jit):
        super().__init__()
        self.heads, self.jit = heads, jit
        self.ln1_w, self.ln1_b = nn.Parameter(torch.ones(width)), nn.Parameter(torch.zeros(width))
        self.ln2_w, self.ln2_b = nn.Parameter(torch.ones(width)), nn.Parameter(torch.zeros(width))
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.fc1 = nn.Linear(width, 4 * width, bias=False)
        self.fc1_bias = nn.Parameter(torch.zeros(4 * width))
        self.fc2 = nn.Linear(4 * width, width)

    def attention(self, x, bias=True):
        """Causal self-attention of x; without ``bias`` the output projection's bias is left to the caller (the
        jitbridge model adds it in add_layer_norm)."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1)                   # [B, heads, T, T]
        scale = 1.0 / math.sqrt(C // self.heads)
        if self.jit:
            p = causal_softmax(scores, scale)
        else:
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            p = torch.softmax((scores * scale).masked_fill(mask, float("-inf")), dim=-1)
        o = (p @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(o) if bias else F.linear(o, self.proj.weight)

    def mlp(self, x, bias=True):
        """Linear, bias + GELU, Linear; without ``bias`` the second linear's bias is left to the caller."""
        h = self.fc1(x)
        h = fused_bias_gelu(h, self.fc1_bias) if self.jit else F.gelu(h + self.fc1_bias, approximate="tanh")
        return self.fc2(h) if bias else F.linear(h, self.fc2.weight)

    def forward(self, x):
        """The eager model's block (the jitbridge model runs its blocks in GPT.residual_stream)."""
        x = x + self.attention(F.layer_norm(x, (x.shape[-1],), self.ln1_w, self.ln1_b, 1e-5))
        return x + self.mlp(F.layer_norm(x, (x.shape[-1],), self.ln2_w, self.ln2_b, 1e-5))


class GPT(nn.Module):
    def __init__(self, layers, width, heads, sequence, vocabulary, jit):
        super().__init__()
        self.jit = jit
        self.tokens = nn.Embedding(vocabulary, width)
        self.positions = nn.Parameter(0.02 * torch.randn(sequence, width))
        self.blocks = nn.ModuleList(Block(width, heads, jit) for _ in range(layers))
        self.lnf_w, self.lnf_b = nn.Parameter(torch.ones(width)), nn.Parameter(torch.zeros(width))
        self.head = nn.Linear(width, vocabulary, bias=False)

    def residual_stream(self, x):
        """The jitbridge model's blocks and final norm: the same sums as the eager model's, with each residual add
        (and the bias of the linear layer before it) done by the layer norm after it, the block's second or the
        next block's first or the final one (add_layer_norm: one kernel where eager runs three)."""
        first = self.blocks[0]
        y = layer_norm(x, first.ln1_w, first.ln1_b)
        norms_after = [(b.ln1_w, b.ln1_b) for b in self.blocks[1:]] + [(self.lnf_w, self.lnf_b)]
        for block, (w, b) in zip(self.blocks, norms_after):
            x, y = add_layer_norm(x, block.attention(y, bias=False), block.proj.bias, block.ln2_w, block.ln2_b)
            x, y = add_layer_norm(x, block.mlp(y, bias=False), block.fc2.bias, w, b)
        return y

    def forward(self, idx, targets):
        x = self.tokens(idx) + self.positions[: idx.shape[1]]
        if self.jit:
            x = self.residual_stream(x)
        else:
            for block in self.blocks:
                x = block(x)
            x = F.layer_norm(x, (x.shape[-1],), self.lnf_w, self.lnf_b, 1e-5)
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def make_models(size, seed=0):
    """(eager model, jitbridge model) of ``size`` with the same weights, on CUDA."""
    layers, width, heads, sequence, batch, vocabulary = SIZES[size]
    torch.manual_seed(seed)
    eager = GPT(layers, width, heads, sequence, vocabulary, jit=False).cuda()
    jit = GPT(layers, width, heads, sequence, vocabulary, jit=True).cuda()
    jit.load_state_dict(eager.state_dict())
    return eager, jit


class Batches:
    """Batches of token sequences drawn from a fixed random bigram table (each token has a few likely
    successors), the targets shifted by one: a model can learn the table, so the loss falls from log(vocabulary)."""

    def __init__(self, size, seed=1):
        _, _, _, self.sequence, self.batch, vocabulary = SIZES[size]
        g = torch.Generator(device="cuda").manual_seed(seed)
        logits = 4.0 * torch.randn(vocabulary, vocabulary, device="cuda", generator=g)
        self.table = torch.softmax(logits, dim=-1)
        self.generator = g

    def next(self):
        idx = torch.empty(self.batch, self.sequence + 1, dtype=torch.long, device="cuda")
        idx[:, 0] = torch.randint(0, self.table.shape[0], (self.batch,), device="cuda", generator=self.generator)
        for t in range(self.sequence):
            idx[:, t + 1] = torch.multinomial(self.table[idx[:, t]], 1, generator=self.generator).squeeze(1)
        return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


def train(model, batches, steps, lr=1e-3):
    """The loss of each step (one .item() per step: this is the loss curve, not the timing)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for idx, targets in batches:
        loss = model(idx, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if len(losses) == steps:
            break
    return losses


def compare_losses(size="small", steps=STEPS):
    """Trains both models on the same batches; returns (eager losses, jitbridge losses)."""
    eager, jit = make_models(size)
    source = Batches(size)
    batches = [source.next() for _ in range(steps)]
    return train(eager, batches, steps), train(jit, batches, steps)


def time_steps(variants, size):
    """{name: ([device ms per step], [host ms per step]), one entry per round} for forward + backward + optimizer
    step, or a reason string for a variant that could not run."""
    source = Batches(size)
    idx, targets = source.next()
    steps, results = {}, {}
    for name, make in variants:
        try:
            model, forward = make()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

            def step(model=model, forward=forward, optimizer=optimizer):
                loss = forward(idx, targets)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()

            for _ in range(3):      # compiles (torch.compile), fills the caching allocator
                step()
            torch.cuda.synchronize()
            steps[name] = step
        except Exception as e:      # torch.compile needs a working compiler toolchain
            results[name] = f"n/a ({type(e).__name__}: {str(e).splitlines()[0][:70] if str(e) else ''})"
    samples = {name: ([], []) for name in steps}
    for r in range(ROUNDS):
        for name, step in (list(steps.items()) if r % 2 == 0 else list(steps.items())[::-1]):
            step()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            start.record()
            for _ in range(STEPS_TIMED):
                step()
            end.record()
            host = (time.perf_counter() - t0) * 1e3 / STEPS_TIMED
            end.synchronize()
            samples[name][0].append(start.elapsed_time(end) / STEPS_TIMED)
            samples[name][1].append(host)
    results.update(samples)
    return results


def speedup(results, base, name):
    """The median over rounds of base's device time / name's (paired per round), or None if either did not run."""
    a, b = results.get(base), results.get(name)
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        return None
    return statistics.median(x / y for x, y in zip(a[0], b[0]))


def timing_variants(size):
    def eager():
        model = make_models(size)[0]
        return model, model

    def jit():
        model = make_models(size)[1]
        return model, model

    def compiled():
        model = make_models(size)[0]
        return model, torch.compile(model, fullgraph=True)

    def compiled_jit():
        model = make_models(size)[1]
        return model, torch.compile(model, fullgraph=True)

    return [("eager PyTorch", eager), ("jitbridge ops", jit), ("torch.compile(eager)", compiled),
            ("torch.compile(jitbridge)", compiled_jit)]


def print_timing(size, results):
    layers, width, heads, sequence, batch, vocabulary = SIZES[size]
    print(f"\nstep time, {size}: {layers} layers, width {width}, {heads} heads, sequence {sequence}, batch {batch}, "
          f"vocabulary {vocabulary}; matmul precision {torch.get_float32_matmul_precision()!r} (median of {ROUNDS} "
          f"rounds of {STEPS_TIMED} steps back to back; speedups: median of the per-round ratios)")
    for name, value in results.items():
        if isinstance(value, str):
            print(f"  {name:<24} {value}")
            continue
        device, host = (statistics.median(v) for v in value)
        ratio = speedup(results, "eager PyTorch", name)
        shown = f"{ratio:5.2f}x vs eager" if ratio is not None else ""
        print(f"  {name:<24} {device:8.3f} ms/step (host {host:7.3f} ms/step)  {shown}")
    compiled = speedup(results, "torch.compile(eager)", "torch.compile(jitbridge)")
    if compiled is not None:
        print(f"  torch.compile(jitbridge) vs torch.compile(eager): {compiled:.2f}x")


def plot(curves, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(no matplotlib here: {path} not written)")
        return
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.plot(curves["eager"], label="eager PyTorch")
    top.plot(curves["jitbridge"], label="jitbridge ops", linestyle="--")
    top.set_ylabel("training loss")
    top.legend()
    bottom.plot([a - b for a, b in zip(curves["jitbridge"], curves["eager"])])
    bottom.set_ylabel("jitbridge - eager")
    bottom.set_xlabel("step")
    fig.suptitle("GPT example (small size): loss curves")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"loss curves plotted to {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--sizes", default="small,large", help="sizes to time (comma-separated), or 'none'")
    parser.add_argument("--fp32-matmul", action="store_true", help="time with full-float32 matrix products (no TF32)")
    parser.add_argument("--json", help="write the loss curves and step times to this file")
    parser.add_argument("--plot", help="plot the loss curves to this PNG file (needs matplotlib)")
    args = parser.parse_args(argv)
    import jitbridge.torch as jt
    runners = {op._schema.name: jt.runner(op) for op in (fused_bias_gelu, layer_norm, add_layer_norm, causal_softmax)}
    for name, r in runners.items():  # native unless JITBRIDGE_TORCH_NATIVE=0 or the add-on cannot be built
        print(f"{name}: {r.kind} runner ({r.reason})")

    eager_losses, jit_losses = compare_losses(steps=args.steps)
    worst = max(abs(a - b) for a, b in zip(eager_losses, jit_losses))
    print(f"loss curves, small size, {args.steps} steps: eager {eager_losses[0]:.4f} -> {eager_losses[-1]:.4f}, "
          f"jitbridge {jit_losses[0]:.4f} -> {jit_losses[-1]:.4f}; largest difference {worst:.2e} "
          f"(tolerance {LOSS_TOLERANCE:.0e}: {'ok' if worst <= LOSS_TOLERANCE else 'EXCEEDED'})")
    for step in range(0, args.steps, max(1, args.steps // 6)):
        print(f"  step {step:4d}: eager {eager_losses[step]:.5f}  jitbridge {jit_losses[step]:.5f}")
    report = {"steps": args.steps, "loss_tolerance": LOSS_TOLERANCE,
              "losses": {"eager": eager_losses, "jitbridge": jit_losses}, "timing": {},
              "device": torch.cuda.get_device_name(),
              "runners": {name: r.kind for name, r in runners.items()}}
    sizes = [] if args.sizes == "none" else args.sizes.split(",")
    torch.set_float32_matmul_precision("highest" if args.fp32_matmul else "high")
    report["matmul_precision"] = torch.get_float32_matmul_precision()
    for size in sizes:
        results = time_steps(timing_variants(size), size)
        print_timing(size, results)
        report["timing"][size] = {
            k: v if isinstance(v, str) else {"device_ms": statistics.median(v[0]), "host_ms": statistics.median(v[1]),
                                             "speedup_vs_eager": speedup(results, "eager PyTorch", k),
                                             "rounds_device_ms": v[0], "rounds_host_ms": v[1]}
            for k, v in results.items()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.plot:
        plot(report["losses"], args.plot)
    if worst > LOSS_TOLERANCE:
        return 1
    print("gpt: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
