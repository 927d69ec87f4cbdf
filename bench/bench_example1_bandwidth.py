"""bench_example1_bandwidth.py — how close example 1's speedup can get: the bytes each variant of forward +
backward (examples/torch/fused_bias_gelu.py, 64M float32 elements) must move, its GPU time per step in a
back-to-back loop, its achieved bandwidth against a device-to-device copy's in the same run, and the speedup
over eager that the bytes allow (the ceiling when both variants run at the same bandwidth).

Eager PyTorch moves 8 arrays' worth per step (x + bias: read x, write t; gelu: read t, write y; gelu's backward:
read grad_y and t, write grad_t; the sum over rows for grad_bias: read grad_t), the jitbridge op 5 (forward: read
x, write y; backward: read x and grad_y, write grad_x, summing grad_bias on the way). The ceiling is 8/5 = 1.60x,
issue 15's and 26's goal for one step: no fused op of this shape can beat it by more than eager's kernels fall
short of its bandwidth. Needs a GPU and PyTorch; prints a table."""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import ROOT, gpu_jitbridge, print_table  # noqa: E402

EAGER_ARRAYS, FUSED_ARRAYS = 8, 5   # whole [rows, C] arrays read or written per forward + backward (see above)
ROUNDS, LOOP = 15, 10


def main():
    _, torch = gpu_jitbridge("bench_example1_bandwidth", "torch")
    sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))
    import fused_bias_gelu as ex

    rows, cols = ex.ROWS, ex.COLS
    x = torch.randn(rows, cols, device="cuda", requires_grad=True)
    bias = torch.randn(cols, device="cuda", requires_grad=True)
    grad_y = torch.randn(rows, cols, device="cuda")
    out = torch.empty_like(grad_y)
    array_bytes = x.numel() * x.element_size()
    variants = [("device-to-device copy (torch copy_)", 2, lambda: out.copy_(grad_y)),
                ("eager PyTorch: gelu(x + bias), fwd + grad", EAGER_ARRAYS,
                 lambda: ex.forward_backward(ex.reference, x, bias, grad_y)),
                ("jitbridge op fused_bias_gelu, fwd + grad", FUSED_ARRAYS,
                 lambda: ex.forward_backward(ex.fused_bias_gelu, x, bias, grad_y))]
    for _, _, fn in variants:  # warm up: kernels compiled, allocator filled
        fn()
    ms = {name: [] for name, _, _ in variants}
    for _ in range(ROUNDS):  # round-robin, so drift hits every variant alike
        for name, _, fn in variants:
            ms[name].append(ex.time_loop_ms(fn, LOOP)[0])  # the example's own loop timing: GPU ms per call
    median = {name: statistics.median(v) for name, v in ms.items()}
    copy_name = variants[0][0]
    copy_gbs = 2 * array_bytes / median[copy_name] / 1e6
    table = []
    for name, arrays, _ in variants:
        gbs = arrays * array_bytes / median[name] / 1e6
        table.append([name, f"{arrays} x {array_bytes / 2**20:.0f} MiB", f"{median[name]:.3f}", f"{gbs:.0f}",
                      f"{gbs / copy_gbs:.2f}"])
    print_table(f"GPU time per call, {rows}x{cols} float32, medians of {ROUNDS} rounds of {LOOP} back-to-back calls "
                f"({torch.cuda.get_device_name()})",
                ["variant", "bytes moved", "ms", "GB/s", "vs copy"], table, key="example1_bandwidth")
    eager, fused = median[variants[1][0]], median[variants[2][0]]
    print(f"speedup over eager: measured {eager / fused:.2f}x; the bytes allow {EAGER_ARRAYS / FUSED_ARRAYS:.2f}x when "
          f"both run at the same bandwidth; goal >= {ex.SPEEDUP_GOAL}x: {(eager / fused) / ex.SPEEDUP_GOAL - 1:+.1%} "
          f"of margin in this run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
