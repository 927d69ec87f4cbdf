"""bench_framework_outputs.py — jitbridge.empty_like of a CuPy array (CuPy's allocator, issue 28; goal: at most 1.2x
cupy.empty_like) beside cupy.empty_like itself and jitbridge.empty_like of a torch tensor beside torch.empty_like,
for a small array (the allocation itself is a pool hit: what is measured is the call). A second table: what
allocator= costs for a jitbridge.Tensor (jitbridge.allocators' CuPy and torch adapters, a minimal Python allocator)
beside jitbridge's own pool. Needs a GPU and CuPy (torch optional); exits 0 otherwise."""
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
    allocator_costs(jitbridge, cp, loop)


def allocator_costs(jitbridge, cp, loop):
    """jitbridge.empty(1024 float32) with allocator= beside jitbridge's own pool (cuMemAllocAsync), and the
    framework's own empty for the same size."""
    from jitbridge.allocators import CupyAllocator, TorchAllocator

    class Minimal:   # the protocol's floor: CuPy's pool through two Python calls
        def allocate(self, size, stream):
            return cp.cuda.alloc(size)

        def deallocate(self, ptr, size, stream):
            pass

    own = loop(lambda: jitbridge.empty(1024, "float32"))
    rows = [["jitbridge's pool (none)", fmt_us(own), "1.00x", ""]]
    cases = [("CupyAllocator()", CupyAllocator(), lambda: cp.empty(1024, cp.float32)),
             ("minimal Python allocator", Minimal(), lambda: cp.empty(1024, cp.float32))]
    try:
        import torch
        cases.append(("TorchAllocator()", TorchAllocator(), lambda: torch.empty(1024, device="cuda")))
    except ImportError:
        pass
    for name, allocator, theirs in cases:
        ours = loop(lambda: jitbridge.empty(1024, "float32", allocator=allocator))
        rows.append([name, fmt_us(ours), f"{ours / own:.2f}x", f"{ours / loop(theirs):.2f}x"])
    with jitbridge.using_allocator(CupyAllocator()):
        scoped = loop(lambda: jitbridge.empty(1024, "float32"))
    rows.append(["using_allocator(CupyAllocator())", fmt_us(scoped), f"{scoped / own:.2f}x", ""])
    print_table("allocator= for jitbridge.Tensor outputs: empty(1024 float32), allocate + free",
                ["allocator", "per call", "vs jitbridge's pool", "vs the framework's empty"], rows,
                key="tensor_allocators")


if __name__ == "__main__":
    main()
