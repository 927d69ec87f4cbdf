"""jitbridge.benchmark: GPU time (CUDA events) and host time of a launch or any callable, with warm-up, an L2 flush,
statistics, achieved GB/s and TFLOP/s, and round-robin comparisons of several variants. The measuring loop is plain
Python over a timer object (CudaEventTimer on a GPU, a stand-in in tests), see docs/BENCHMARK.md."""

import math
import numbers
import time

from ._benchmark_result import BenchmarkResult, Comparison

__all__ = ["benchmark", "CudaEventTimer"]

_TIMER_METHODS = ("flush", "start", "stop", "synchronize", "elapsed_ms", "host_ns")


class CudaEventTimer:
    """The timer jitbridge.benchmark uses by default: CUDA events recorded on one stream through jitbridge's own
    driver access (no torch or CuPy needed), the host clock time.perf_counter_ns, and an L2 flush that writes a
    device buffer of twice the L2 size (the device attribute) on the stream.

    ``stream``: None (the stream a jitbridge launch with ``args`` would use: the current stream of the framework
    the first array in ``args``, or in a tuple or list there, came from, else the legacy default stream), an int
    handle, or a torch / CuPy / any ``__cuda_stream__`` stream object. ``device``: an ordinal (default: the current
    device). The events and the flush buffer belong to the timer and are released with it. Raises TypeError /
    ValueError naming ``stream`` or ``device``, NoDriverError without a CUDA driver.

    Any object with the same methods can stand in for it (``benchmark(timer=...)``): flush(), start(), stop(),
    synchronize(), elapsed_ms() (the GPU milliseconds of every sample since the last call, in order) and host_ns().
    """

    __module__ = "jitbridge"

    def __init__(self, stream=None, args=(), device=None):
        """Makes the events and the flush buffer on ``device`` for ``stream`` (both as the class says); ``args`` are
        the launch's arguments, whose first array (itself or inside a tuple or list there) picks the stream when
        ``stream`` is None. Raises as the class says."""
        from . import _core

        # The arrays may be the arguments themselves or sit in a launch's argument tuple (k(grid, block, (x, y))).
        candidates = []
        for a in args:
            candidates.extend(a if isinstance(a, (tuple, list)) else (a,))
        self._timer = _core._EventTimer(stream, tuple(candidates), device)
        self._flush_bytes = None

    @property
    def stream(self):
        """The stream the events are recorded on, as an int handle (1: the legacy default stream)."""
        return self._timer.stream

    @property
    def device(self):
        """The device ordinal whose primary context holds the events."""
        return self._timer.device

    def flush(self):
        """Writes twice the L2 cache size of a scratch buffer on the stream (allocated on the first call)."""
        if self._flush_bytes is None:
            self._flush_bytes = max(2 * self._timer.l2_cache_bytes, 1 << 20)
        self._timer.flush_l2(self._flush_bytes)

    def start(self):
        """Records the start event of a new sample on the stream (never synchronizes). RuntimeError when a sample
        is open."""
        self._timer.start()

    def stop(self):
        """Records the end event of the open sample. RuntimeError when none is open."""
        self._timer.stop()

    def synchronize(self):
        """Waits until the work queued on the stream is done (the GIL released)."""
        self._timer.synchronize()

    def elapsed_ms(self):
        """Waits for the last end event and returns the GPU milliseconds of every sample since the last call (or
        since construction), in order (a list); the timer can then take new samples (a timer passed to several
        benchmark() calls). A fault in the timed work raises here (DriverError)."""
        ms = self._timer.elapsed_ms()
        self._timer.clear()
        return ms

    @staticmethod
    def host_ns():
        """The host clock: time.perf_counter_ns()."""
        return time.perf_counter_ns()


def _count(value, arg, least):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{arg}: expected an int, got {type(value).__name__}")
    if value < least:
        raise ValueError(f"{arg}: {value} is less than {least}")
    return int(value)


def _amount(value, arg):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{arg}: expected a number (or None), got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{arg}: expected a positive finite number, got {value!r}")
    return value


def _variants(fn):
    """fn as a dict name -> callable, and whether it was a dict."""
    if isinstance(fn, dict):
        if not fn:
            raise ValueError("fn: the dict of variants is empty")
        for key, f in fn.items():
            if not isinstance(key, str):
                raise TypeError(f"fn: variant names must be str, got {type(key).__name__} {key!r:.60}")
            if not callable(f):
                raise TypeError(f"fn[{key!r}]: expected a callable, got {type(f).__name__}")
        return dict(fn), True
    if not callable(fn):
        raise TypeError(f"fn: expected a callable or a dict of name -> callable, got {type(fn).__name__}")
    # A function's __name__, a jitbridge kernel's .name, else the type's name.
    label = next((v for v in (getattr(fn, "__name__", None), getattr(fn, "name", None)) if isinstance(v, str) and v),
                 type(fn).__name__)
    return {label: fn}, False


def benchmark(fn, *args, kwargs=None, n_warmup=10, n_repeat=100, bytes=None, flops=None, stream=None, device=None,
              flush_l2=True, baseline=None, name=None, timer=None):
    """Times ``fn(*args, **kwargs)`` on the GPU with CUDA events, and its host time per call.

    ``fn``: a callable (a jitbridge kernel with its launch arguments bound, a lambda launching one, a CuPy / torch
    / Numba call, anything that queues GPU work on the stream) or a dict ``{name: callable}`` of variants to
    compare, each called with the same arguments. Each is called ``n_warmup`` times untimed, then ``n_repeat``
    times timed; variants are interleaved round-robin (sample i of every variant before sample i + 1 of any).
    Before each timed call, ``flush_l2=True`` writes a buffer of twice the L2 cache size on the stream (untimed),
    so that every sample starts with a cold L2, as Triton's do_bench does (and the GPU is busy while the call is
    queued, so launch latency does not count as GPU time).

    Each sample: the start event is recorded on the stream, fn is called (its host time measured around the call
    alone), the end event recorded. GPU time is what the stream did between the events: work fn queues on another
    stream is not seen unless that stream is the one timed (``stream=``). After the loop the host waits once for
    the last event (the only synchronization); a fault in fn's kernels raises there.

    ``bytes`` / ``flops``: the bytes moved and floating-point operations done by one call; the result then has
    achieved GB/s (10**9 B/s) and TFLOP/s at the median. ``stream``: where the events are recorded: an int
    handle, a torch / CuPy / ``__cuda_stream__`` stream, or None: ``kwargs["stream"]`` when there is one (a launch
    given stream=), else the stream a jitbridge launch with ``args`` would use (the current stream of the framework
    of the first array argument, or of the first array in a tuple or list argument, else the legacy default stream).
    ``device``: the device ordinal (default: the current one). ``baseline``: the variant the comparison's ratios
    are taken against (default: the first). ``name``: the name of a single callable (default: its __name__).
    ``timer``: an object with the methods of CudaEventTimer to measure with instead of CUDA events.

    Returns a BenchmarkResult, or a Comparison when ``fn`` is a dict. Raises TypeError / ValueError naming the
    argument for bad arguments (before anything is called), NoDriverError without a CUDA driver (unless
    ``timer`` is given), and whatever fn raises.
    """
    variants, several = _variants(fn)
    if kwargs is None:
        kwargs = {}
    elif not isinstance(kwargs, dict):
        raise TypeError(f"kwargs: expected a dict of keyword arguments for fn, got {type(kwargs).__name__}")
    n_warmup = _count(n_warmup, "n_warmup", 0)
    n_repeat = _count(n_repeat, "n_repeat", 1)
    bytes = _amount(bytes, "bytes")
    flops = _amount(flops, "flops")
    if not isinstance(flush_l2, bool):
        raise TypeError(f"flush_l2: expected True or False, got {type(flush_l2).__name__}")
    if name is not None:
        if not isinstance(name, str):
            raise TypeError(f"name: expected a str, got {type(name).__name__}")
        if several:
            raise ValueError("name: give the names as the keys of the fn dict when comparing variants")
        variants = {name: next(iter(variants.values()))}
    if baseline is not None:
        if not several:
            raise ValueError("baseline: only for a comparison (fn a dict of variants)")
        if baseline not in variants:
            raise ValueError(f"baseline: {baseline!r:.80} is not one of the variants {list(variants)}")
    if timer is None:
        if stream is None and "stream" in kwargs:
            stream = kwargs["stream"]  # a launch given stream= is timed on that stream
        timer = CudaEventTimer(stream, args, device)
    else:
        if stream is not None or device is not None:
            raise ValueError("stream, device: a timer= given measures on its own stream; leave stream and device None")
        missing = [m for m in _TIMER_METHODS if not callable(getattr(timer, m, None))]
        if missing:
            raise TypeError(f"timer: {type(timer).__name__} lacks the method(s) {', '.join(missing)}")

    samples = _measure(list(variants.values()), args, kwargs, n_warmup, n_repeat, flush_l2, timer)
    stream_handle = getattr(timer, "stream", None)
    results = {key: BenchmarkResult(key, gpu, host, n_warmup=n_warmup, n_repeat=n_repeat, bytes=bytes, flops=flops,
                                    flush_l2=flush_l2, stream=stream_handle)
               for key, (gpu, host) in zip(variants, samples)}
    if several:
        return Comparison(results, baseline)
    return next(iter(results.values()))


def _measure(fns, args, kwargs, n_warmup, n_repeat, flush_l2, timer):
    """The measuring loop: [(gpu_ms list, host_us list)] per fn. Warm-up and timed calls go round-robin over fns."""
    for _ in range(n_warmup):
        for f in fns:
            f(*args, **kwargs)
    # The warm-up's work finishes before the first sample, so that no sample's host time waits on a full queue.
    timer.synchronize()
    host = [[] for _ in fns]
    for _ in range(n_repeat):
        for i, f in enumerate(fns):
            if flush_l2:
                timer.flush()
            timer.start()
            t0 = timer.host_ns()
            f(*args, **kwargs)
            t1 = timer.host_ns()
            timer.stop()
            host[i].append((t1 - t0) * 1e-3)
    gpu = list(timer.elapsed_ms())
    expected = n_repeat * len(fns)
    if len(gpu) != expected:
        raise RuntimeError(f"timer: elapsed_ms() returned {len(gpu)} samples, expected {expected}")
    # Sample k belongs to fn k % len(fns) (round-robin order).
    return [(gpu[i::len(fns)], host[i]) for i in range(len(fns))]
