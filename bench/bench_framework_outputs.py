"""bench_framework_outputs.py — jitbridge.empty_like of a CuPy array (CuPy's allocator, issue 28; goal: at most 1.2x
cupy.empty_like) beside cupy.empty_like itself and jitbridge.empty_like of a torch tensor beside torch.empty_like,
for a small array (the allocation itself is a pool hit: what is measured is the call). Needs a GPU and CuPy (torch
optional); exits 0 otherwise."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import fmt_us, gpu_jitbridge, median_us, print_table  # noqa: E402

N = 2000


def main():
    jitbridge, cp = gpu_jitbridge("bench_framework_outputs", "cupy")
    x = cp.zeros(1024, cp.float32)
    assert type(jitbridge.empty_like(x)) is cp.ndarray

    def loop(fn):
        def run():
            for _ in range(N):
                fn()
        return median_us(run, repeat=9) / N

    rows = []
    ours, theirs = loop(lambda: jitbridge.empty_like(x)), loop(lambda: cp.empty_like(x))
    rows.append(["cupy.ndarray", fmt_us(ours), fmt_us(theirs), f"{ours / theirs:.2f}x"])
    try:
        import torch
        t = torch.zeros(1024, device="cuda")
        ours, theirs = loop(lambda: jitbridge.empty_like(t)), loop(lambda: torch.empty_like(t))
        rows.append(["torch.Tensor", fmt_us(ours), fmt_us(theirs), f"{ours / theirs:.2f}x"])
    except ImportError:
        pass
    print_table("empty_like of a framework's array: jitbridge vs the framework's own (goal for CuPy: <= 1.2x)",
                ["array", "jitbridge.empty_like", "framework empty_like", "ratio"], rows, key="framework_outputs")


if __name__ == "__main__":
    main()
