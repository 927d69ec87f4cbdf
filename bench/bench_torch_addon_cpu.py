"""bench_torch_addon_cpu.py — the torch add-on's own host cost, with no GPU: example 1's fused bias + GELU op on
CPU tensors through the native runner's kernels (Autograd kernel, JitbridgeNode, PhaseKernel), with the phases
marked trusted so that CPU tensors pass and no launch happens (everything but the launches and the CUDA
allocator). Median and minimum microseconds per call for the forward, forward + torch.autograd.grad and the
_backward op called directly.

  python3 bench/bench_torch_addon_cpu.py [PYTHON_DIR ...]

Each PYTHON_DIR (default: the package bench/_table.py picks: the build tree's, else the installed one) is a folder
holding a jitbridge package (e.g. a copy of build/python made before a change); each is measured in its own
processes, round-robin, so an A/B runs in one go on one machine. The op's declaration is this checkout's
examples/torch/ops.py for all of them. Needs torch and a C++ compiler (the add-on is built at first use into
JITBRIDGE_CACHE_DIR)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import print_table, use_jitbridge  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS, PER_PROCESS, BATCH = 6, 3, 1000   # processes per folder (round-robin), batches per process, calls per batch

WORKER = r'''
import gc, json, os, sys, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(sys.argv[2], "examples", "torch"))
os.environ["JITBRIDGE_TORCH_NATIVE"] = "1"
import torch
import jitbridge.torch.description as description
describe = description.describe
def trusted(spec):  # CPU tensors pass the device checks; lead.is_cuda() is false, so nothing launches
    text, kernels = describe(spec)
    return text.replace("\nendphase", "\ntrusted 1\nendphase"), kernels
description.describe = trusted
import ops
import jitbridge.torch as jt
assert jt.runner(ops.fused_bias_gelu).kind == "native", jt.runner(ops.fused_bias_gelu)
torch.set_num_threads(1)
torch.autograd.set_multithreading_enabled(False)
x = torch.randn(64, 256, requires_grad=True)
b = torch.randn(256, requires_grad=True)
g = torch.randn(64, 256)
xd, bd = x.detach(), b.detach()
op = ops.fused_bias_gelu
bwd = torch.ops.jitbridge_examples.fused_bias_gelu_backward.default
steps = {
    "forward (no grad)": lambda: op(xd, bd),
    "forward + autograd.grad": lambda: torch.autograd.grad(op(x, b), (x, b), g),
    "_backward op": lambda: bwd(xd, bd, g),
}
rounds, batch = int(sys.argv[3]), int(sys.argv[4])
gc.disable()  # no collection inside a timed batch (nothing here makes cycles)
out = {}
for name, step in steps.items():
    for _ in range(200):
        step()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(batch):
            step()
        times.append((time.perf_counter() - t0) / batch * 1e6)
    out[name] = times
print(json.dumps(out))
'''


def default_dir():
    """The folder holding the jitbridge package _table.use_jitbridge() picks (the build tree's, else the installed)."""
    use_jitbridge()
    import jitbridge
    return os.path.dirname(os.path.dirname(os.path.abspath(jitbridge.__file__)))


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("bench_torch_addon_cpu: needs PyTorch")
    dirs = sys.argv[1:] or [default_dir()]
    results = {d: {} for d in dirs}
    for _ in range(ROUNDS):
        for d in dirs:
            done = subprocess.run([sys.executable, "-c", WORKER, d, ROOT, str(PER_PROCESS), str(BATCH)], capture_output=True,
                                  text=True, env=dict(os.environ, PYTHONPATH=""))
            if done.returncode != 0:
                sys.exit(f"{d}: exit {done.returncode}\n{done.stderr[-3000:]}")
            for name, times in json.loads(done.stdout.splitlines()[-1]).items():
                results[d].setdefault(name, []).extend(times)
    names = list(results[dirs[0]])
    rows = []
    for name in names:
        base = sorted(results[dirs[0]][name])[len(results[dirs[0]][name]) // 2]
        row = [name]
        for d in dirs:
            t = sorted(results[d][name])
            median = t[len(t) // 2]
            row += [f"{median:.2f}", f"{median / base:.2f}x", f"{t[0]:.2f}"]
        rows.append(row)
    header = ["step"] + [h for i, d in enumerate(dirs) for h in (f"[{i}] median µs", "ratio", "min")]
    print_table("torch add-on host cost per call (CPU tensors, trusted phases, no launch)", header, rows)
    for i, d in enumerate(dirs):
        print(f"[{i}] {d}")


if __name__ == "__main__":
    main()
