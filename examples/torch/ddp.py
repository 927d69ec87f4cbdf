"""ddp.py — jitbridge ops in multi-GPU training: DistributedDataParallel over NCCL, started by torchrun.

    torchrun --nproc-per-node 2 examples/torch/ddp.py

Each rank (one process per GPU) trains the same small model, Linear -> fused_bias_gelu -> Linear -> row_softmax
(the jitbridge ops of ops.py), wrapped in DistributedDataParallel, on its own slice of one global batch. DDP
all-reduces (averages) the gradients over NCCL after each backward, the jitbridge ops' gradients (the GELU's bias)
like any other. Because every rank holds an equal slice and the loss is a mean, the averaged gradient is the
full batch's gradient, so the training must follow, step by step, a single-process run on the whole global batch.
Each rank checks that:

1. Eager DDP: at every step its loss equals the single-process model's loss on the same slice, and the mean of
   the ranks' losses (all-reduced) equals the single-process loss on the global batch; the first step's averaged
   gradients (the jitbridge bias included) equal the global batch's; the final weights equal the
   single-process run's. All in float64, within TOLERANCE (the only difference is the order of floating-point
   sums: per-slice sums then an average, against one sum).
2. The same with torch.compile of the DDP model (DDP's graph splitting per gradient bucket, the jitbridge ops as
   custom ops in the graph), against the same single-process run.
3. Collectives on jitbridge memory: arrays allocated by jitbridge.empty and written by a jitbridge kernel, seen
   by torch through torch.from_dlpack (no copy: the same address), are the input and output of all_reduce,
   all_gather and broadcast; every element is checked.

Each rank prints a summary line (naming the runner the ops used: native or python, see jitbridge.torch.runner);
rank 0 prints "ddp: ok" when every rank passed (a rank that fails raises, and torchrun then stops the others and
exits with an error). Run without torchrun (no RANK in the environment), it says how to start it and exits with
status 2.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import jitbridge
import jitbridge.torch as jt
from ops import fused_bias_gelu, row_softmax

GLOBAL_BATCH = 256        # rows per step over all ranks (each rank takes GLOBAL_BATCH // world_size)
FEATURES, HIDDEN, CLASSES = 64, 256, 32
STEPS = 12
LR = 0.5
TOLERANCE = dict(rtol=1e-9, atol=1e-12)   # float64; measured differences are around 1e-15
SEED = 1234
# Collectives on float32 values between 0.5 and ~10: moved data must be exact up to the last bit of rounding (the
# kernel rounds a * base + b as torch does, but a compiler may still differ by one unit); sums add one rounding.
EXACT = dict(rtol=2e-7, atol=0)
SUMMED = dict(rtol=1e-6, atol=1e-6)

SCALE_SHIFT = r'''
extern "C" __global__ void scale_shift(const float* base, float* out, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fadd_rn(__fmul_rn(a, base[i]), b);   // no FMA: rounded as torch's a * base + b
}'''


class Net(nn.Module):
    """x [rows, FEATURES] -> class probabilities [rows, CLASSES], through both jitbridge ops."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, HIDDEN, bias=False)
        self.bias = nn.Parameter(0.1 * torch.randn(HIDDEN))   # learnt only through fused_bias_gelu's backward
        self.fc2 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return row_softmax(self.fc2(fused_bias_gelu(self.fc1(x), self.bias)))


def per_row_loss(probabilities, target):
    """Negative log-likelihood of each row's target class."""
    return -probabilities.gather(1, target[:, None]).squeeze(1).log()


def make_model(device):
    torch.manual_seed(SEED)   # the same initial weights in every process and for every run
    return Net().to(device=device, dtype=torch.float64)


def make_data(device):
    """The global batches of all steps, the same on every rank (each takes its slice)."""
    g = torch.Generator().manual_seed(SEED + 1)
    x = torch.randn(STEPS, GLOBAL_BATCH, FEATURES, generator=g, dtype=torch.float64)
    teacher = torch.randn(FEATURES, CLASSES, generator=g, dtype=torch.float64)   # a task there is to learn
    target = (x @ teacher).argmax(dim=-1)
    return x.to(device), target.to(device)


def single_process_run(device, x, target, world):
    """The reference: one model on whole global batches. Returns per step the global loss and each rank-slice's
    loss, the first step's gradients (by parameter name) and the final weights."""
    model = make_model(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    rows = GLOBAL_BATCH // world
    global_losses, slice_losses, first_grads = [], [], None
    for step in range(STEPS):
        per_row = per_row_loss(model(x[step]), target[step])
        loss = per_row.mean()
        opt.zero_grad()
        loss.backward()
        if first_grads is None:
            first_grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        global_losses.append(loss.item())
        slice_losses.append(per_row.detach().view(world, rows).mean(dim=1).cpu())
        opt.step()
    return global_losses, slice_losses, first_grads, {n: p.detach().clone() for n, p in model.named_parameters()}


def ddp_run(device, x, target, rank, world, compiled):
    """The same training under DDP, this rank on its slice. Returns per step (this rank's loss, the ranks' mean
    loss), the first step's averaged gradients and the final weights."""
    ddp = DDP(make_model(device), device_ids=[device.index])
    run = torch.compile(ddp) if compiled else ddp
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    rows = GLOBAL_BATCH // world
    mine = slice(rank * rows, (rank + 1) * rows)
    losses, first_grads = [], None
    for step in range(STEPS):
        loss = per_row_loss(run(x[step, mine]), target[step, mine]).mean()
        opt.zero_grad()
        loss.backward()                      # DDP all-reduces the gradients here (NCCL), bucket by bucket
        if first_grads is None:
            first_grads = {n: p.grad.detach().clone() for n, p in ddp.module.named_parameters()}
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append((loss.item(), mean.item() / world))
        opt.step()
    return losses, first_grads, {n: p.detach().clone() for n, p in ddp.module.named_parameters()}


def check_training(label, reference, run, rank):
    """Compares a DDP run with the single-process one; returns the largest loss difference. Raises AssertionError."""
    global_losses, slice_losses, ref_grads, ref_weights = reference
    losses, grads, weights = run
    worst = 0.0
    for step, ((mine, mean), full, slices) in enumerate(zip(losses, global_losses, slice_losses)):
        for what, got, want in (("this rank's loss", mine, slices[rank].item()), ("mean loss", mean, full)):
            torch.testing.assert_close(got, want, **TOLERANCE,
                                       msg=lambda m: f"{label}, step {step}: {what} differs from the single-process "
                                                     f"run: {m}")
            worst = max(worst, abs(got - want))
    for name, want in ref_grads.items():   # 'bias' is the jitbridge op's gradient, averaged by DDP
        torch.testing.assert_close(grads[name], want, **TOLERANCE,
                                   msg=lambda m: f"{label}: step 0 gradient of {name} differs: {m}")
    for name, want in ref_weights.items():
        torch.testing.assert_close(weights[name], want, **TOLERANCE,
                                   msg=lambda m: f"{label}: final weight {name} differs: {m}")
    return worst


def check_collectives(device, rank, world):
    """all_reduce, all_gather and broadcast with jitbridge-allocated arrays (viewed by torch) as inputs and outputs."""
    n = 100_003
    kernel = jitbridge.RawKernel(SCALE_SHIFT, "scale_shift")
    g = torch.Generator().manual_seed(SEED + 2)
    base = (torch.rand(n, generator=g) + 0.5).to(device)   # the same on every rank; never zero

    def rank_values(r):
        return (r + 1.0) * base + r      # what rank r's kernel writes

    def filled(r):
        """A jitbridge array on this rank's GPU, written by a jitbridge kernel, and torch's view of it."""
        t = jitbridge.empty((n,), "float32", device=device.index)
        kernel((n + 255) // 256, 256, (base, t, float(r + 1), float(r), n))
        view = torch.from_dlpack(t)
        assert view.data_ptr() == t.ptr and view.device == device, "torch.from_dlpack copied the jitbridge array"
        return t, view

    def poisoned():
        t = jitbridge.empty((n,), "float32", device=device.index)
        view = torch.from_dlpack(t)
        view.fill_(float("nan"))
        return t, view

    # all_reduce in place on jitbridge memory
    t, view = filled(rank)
    dist.all_reduce(view)
    expected = sum(rank_values(r) for r in range(world))
    torch.testing.assert_close(view, expected, **SUMMED, msg=lambda m: f"all_reduce: {m}")
    torch.testing.assert_close(torch.from_dlpack(t), expected, **SUMMED)   # the same memory, seen afresh
    # all_gather: a jitbridge kernel's output in, jitbridge arrays out
    _, mine = filled(rank)
    outs = [poisoned() for _ in range(world)]
    dist.all_gather([v for _, v in outs], mine)
    for r, (t_r, v_r) in enumerate(outs):
        torch.testing.assert_close(v_r, rank_values(r), **EXACT, msg=lambda m: f"all_gather from rank {r}: {m}")
        assert torch.from_dlpack(t_r).data_ptr() == t_r.ptr
    # broadcast from rank 0 into jitbridge arrays on every rank
    t, view = filled(0) if rank == 0 else poisoned()
    dist.broadcast(view, src=0)
    torch.testing.assert_close(view, rank_values(0), **EXACT, msg=lambda m: f"broadcast from rank 0: {m}")
    torch.cuda.synchronize(device)


def main():
    if "RANK" not in os.environ:
        print("ddp.py trains with one process per GPU: start it with torchrun --nproc-per-node 2 "
              "examples/torch/ddp.py", file=sys.stderr)
        return 2
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    if GLOBAL_BATCH % world:
        raise SystemExit(f"ddp.py: the global batch ({GLOBAL_BATCH}) must divide among {world} ranks")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(device)
    x, target = make_data(device)
    reference = single_process_run(device, x, target, world)
    eager = check_training("eager DDP", reference, ddp_run(device, x, target, rank, world, False), rank)
    compiled = check_training("torch.compile(DDP)", reference, ddp_run(device, x, target, rank, world, True), rank)
    check_collectives(device, rank, world)
    print(f"rank {rank}/{world} ({device}): {STEPS} steps of {GLOBAL_BATCH // world} rows, losses equal the "
          f"single-process run on the global batch of {GLOBAL_BATCH} (largest difference: eager {eager:.1e}, "
          f"compiled {compiled:.1e}; tolerance rtol {TOLERANCE['rtol']:g}); loss {reference[0][0]:.6f} -> "
          f"{reference[0][-1]:.6f}; collectives on jitbridge arrays: ok; the ops' runner: "
          f"{'/'.join(sorted({jt.runner(op).kind for op in (fused_bias_gelu, row_softmax)}))}", flush=True)
    # A rank that failed raised above, and torchrun stops the others: reaching this, every rank passed.
    passed = torch.ones(1, device=device)
    dist.all_reduce(passed)
    dist.destroy_process_group()
    passed = int(passed.item()) == world
    if rank == 0 and passed:
        print("ddp: ok", flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
