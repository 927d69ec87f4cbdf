"""bench_torch_modes.py — example 1's fused bias + GELU op (forward + torch.autograd.grad on a small x, where host
time is all there is) run the ways PyTorch offers beside eager mode: eager with set_multithreading_enabled(False)
(the backward on the calling thread), torch.compile(fullgraph=True), torch.compile(mode="reduce-overhead") and a
captured CUDA graph; for the eager composite and the jitbridge ops. Host and device microseconds per step,
round-robin. Needs a GPU and PyTorch; prints a table."""
import os
import statistics
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import print_table, use_jitbridge  # noqa: E402

BATCH, ROUNDS = 100, 20      # steps per timed batch, round-robin rounds
VARIANTS = ("eager PyTorch: gelu(x + bias)", "jitbridge.torch.custom_op", "jitbridge.torch.function")


def plain(torch, fn, x, bias, grad_y):
    """step() for eager mode."""
    return lambda: torch.autograd.grad(fn(x, bias), (x, bias), grad_y)


def single_threaded(torch, fn, x, bias, grad_y):
    """(step(), the context each timed batch runs in): the backward on the calling thread."""
    return plain(torch, fn, x, bias, grad_y), lambda: torch.autograd.set_multithreading_enabled(False)


def compiled(torch, fn, mode, tag):
    """fn inside a function compiled with torch.compile(fullgraph=True) and ``mode``. Each gets a code object of its
    own (named model_<tag>), so that torch.compile's caches, kept per code object, hold one entry each."""
    def model(x, bias):
        return fn(x, bias)
    own = types.FunctionType(model.__code__.replace(co_name=f"model_{tag}"), model.__globals__,
                             closure=model.__closure__)
    return torch.compile(own, fullgraph=True, mode=mode)


def captured(torch, tp, fn, shape):
    """(step(), check()) for a CUDA graph of forward + torch.autograd.grad on static inputs of ``shape``, captured
    after a warm-up on a side stream (see docs/TORCH.md): step() replays it; check() puts new data in the static
    inputs, replays and compares the gradients with eager's (AssertionError when they differ)."""
    x, bias, grad_y = tp.small_inputs(torch, shape)

    def forward_backward():
        y = fn(x, bias)
        return (y, *torch.autograd.grad(y, (x, bias), grad_y))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            forward_backward()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = forward_backward()

    def check():
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
            bias.copy_(torch.randn_like(bias))
        graph.replay()
        torch.cuda.synchronize()
        y = tp.eager_composite(torch)(x, bias)
        expected = (y, *torch.autograd.grad(y, (x, bias), grad_y))
        for got, want in zip(static, expected):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    return graph.replay, check


def time_batch(torch, step, context):
    """(host us, device us) per step over BATCH back-to-back steps from an idle GPU: CPU clock and CUDA events
    around the same steps (device equals host where the GPU waits for the host)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    with context():
        host = time.perf_counter()
        start.record()
        for _ in range(BATCH):
            step()
        end.record()
        host = time.perf_counter() - host
    end.synchronize()
    return host * 1e6 / BATCH, start.elapsed_time(end) * 1e3 / BATCH


def entries(torch, tp, ops):
    """([(mode, variant, step, context)], [(mode, variant, reason)]): every way of running each variant, its results
    checked against eager's first."""
    import contextlib
    import itertools

    x, bias, grad_y = tp.small_inputs(torch)
    made, failed = tp.peers(torch, ops, names=VARIANTS)
    unavailable = [("eager mode", name, why) for name, why in failed]
    fns = {name: fn for name, fn, _ in made}
    nothing = contextlib.nullcontext
    good, tags = [], itertools.count()

    def add(mode, name, build):
        try:
            step, context, check = build()
            check()
            for _ in range(3):
                with context():
                    step()
            torch.cuda.synchronize()
            good.append((mode, name, step, context))
        except Exception as e:
            unavailable.append((mode, name, f"n/a ({tp.describe(e)})"))

    def eager_mode(fn):
        return plain(torch, fn, x, bias, grad_y), nothing, lambda: tp.check_matches_eager(torch, fn, x, bias, grad_y)

    def single(fn):
        step, context = single_threaded(torch, fn, x, bias, grad_y)

        def check():
            with context():
                tp.check_matches_eager(torch, fn, x, bias, grad_y)
        return step, context, check

    def compile_with(fn, mode):
        def build():
            c = compiled(torch, fn, mode, next(tags))
            for _ in range(3):   # compiles; reduce-overhead records its graphs after warm-up runs
                plain(torch, c, x, bias, grad_y)()
            return plain(torch, c, x, bias, grad_y), nothing, lambda: tp.check_matches_eager(torch, c, x, bias, grad_y)
        return build

    def graph(fn):
        step, check = captured(torch, tp, fn, tp.SMALL)
        return step, nothing, check

    for name, fn in fns.items():
        add("eager mode", name, lambda: eager_mode(fn))
        add("eager, set_multithreading_enabled(False)", name, lambda: single(fn))
    for name, fn in fns.items():
        if name == "jitbridge.torch.function":
            unavailable.append(("torch.compile(fullgraph=True)", name, "n/a (eager only, by design: use custom_op)"))
            continue
        add("torch.compile(fullgraph=True)", name, compile_with(fn, None))
        add("torch.compile(fullgraph=True, mode='reduce-overhead')", name, compile_with(fn, "reduce-overhead"))
    for name, fn in fns.items():
        add("CUDA graph replay", name, lambda: graph(fn))
    return good, unavailable


def main():
    print(f"bench_torch_modes: measuring {use_jitbridge()}")
    import jitbridge
    if not jitbridge.driver_info()["devices"]:
        print("bench_torch_modes: no GPU here; nothing to measure")
        return 0
    try:
        import torch
    except ImportError:
        print("bench_torch_modes: no GPU here; nothing to measure (PyTorch is not installed)")
        return 0
    import _torch_peers as tp

    good, unavailable = entries(torch, tp, tp.load_ops())
    samples = {(mode, name): ([], []) for mode, name, _, _ in good}
    dropped = {}
    for _ in range(ROUNDS):
        for mode, name, step, context in good:
            if (mode, name) in dropped:
                continue
            try:
                host, device = time_batch(torch, step, context)
            except Exception as e:
                dropped[(mode, name)] = f"n/a ({tp.describe(e)})"
                continue
            samples[(mode, name)][0].append(host)
            samples[(mode, name)][1].append(device)
    med = statistics.median
    eager_device = {mode: med(d) for (mode, name), (_, d) in samples.items() if name == tp.EAGER and d}
    rows, order = [], []
    for mode, name, _, _ in good:
        if mode not in order:
            order.append(mode)
    for mode, name, _ in unavailable:
        if mode not in order:
            order.append(mode)
    for mode in order:
        for (m, name), (host, device) in samples.items():
            if m != mode:
                continue
            if (m, name) in dropped or not host:
                rows.append([mode, name, dropped.get((m, name), "n/a"), "", ""])
                continue
            base = eager_device.get(mode)
            rows.append([mode, name, f"{med(host):.1f}", f"{med(device):.1f}",
                         f"{base / med(device):.2f}x" if base else ""])
        rows += [[m, name, why, "", ""] for m, name, why in unavailable if m == mode]
    shape = "x".join(map(str, tp.SMALL))
    print_table(f"Forward + torch.autograd.grad of example 1's op on x [{shape}] float32, by execution mode: us per "
                f"step, medians over {ROUNDS} round-robin rounds of {BATCH} back-to-back steps from an idle GPU. "
                f"host: CPU clock; device: CUDA events around the same steps (equal to host where the GPU waits "
                f"for the host; a CUDA graph replay shows the kernels' own time)",
                ["mode", "variant", "host us/step", "device us/step", "device: eager / this (same mode)"], rows)
    ours = [(mode, med(samples[(mode, name)][1])) for mode, name, _, _ in good
            if name == tp.JITBRIDGE_OP and samples[(mode, name)][1] and (mode, name) not in dropped]
    if ours:
        print("jitbridge.torch.custom_op, device us/step by mode: " +
              ", ".join(f"{mode} {us:.1f}" for mode, us in ours))
    return 0 if any(name == tp.JITBRIDGE_OP for _, name, _, _ in good) else 1


if __name__ == "__main__":
    sys.exit(main())
