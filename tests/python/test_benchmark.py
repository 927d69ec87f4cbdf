"""jitbridge.benchmark on a stand-in timer (no GPU): statistics, GB/s and TFLOP/s, round-robin order, warm-up, the L2
flush, argument errors naming the argument, the text / HTML / plot renderings; and the CUDA-event timer's errors."""

import math

import pytest

import jitbridge
from jitbridge import BenchmarkResult, Comparison, benchmark


class FakeTimer:
    """Deterministic timer: sample k's GPU time is gpu[k]; the host clock advances host_step ns per read. Logs every
    call (with the calls of the timed functions, through `log`)."""

    def __init__(self, gpu, host_step=1000, log=None):
        self.gpu = list(gpu)
        self.host_step = host_step
        self.now = 0
        self.log = [] if log is None else log
        self.samples = 0
        self.open = False

    def flush(self):
        self.log.append("flush")

    def start(self):
        assert not self.open
        self.open = True
        self.log.append("start")

    def stop(self):
        assert self.open
        self.open = False
        self.samples += 1
        self.log.append("stop")

    def synchronize(self):
        self.log.append("sync")

    def elapsed_ms(self):
        self.log.append("read")
        return self.gpu[:self.samples]

    def host_ns(self):
        self.now += self.host_step
        return self.now


def logging_fn(log, name):
    def f(*args, **kwargs):
        log.append((name, args, tuple(sorted(kwargs.items()))))
    f.__name__ = name
    return f


def test_statistics_of_one_callable():
    gpu = [5.0, 1.0, 3.0, 2.0, 4.0]  # ms
    timer = FakeTimer(gpu, host_step=2500)
    r = benchmark(lambda: None, n_warmup=0, n_repeat=5, bytes=4e9, flops=2e12, timer=timer)
    assert isinstance(r, BenchmarkResult)
    assert r.gpu_ms == tuple(gpu)  # the order taken
    assert r.median_ms == 3.0
    assert r.mean_ms == 3.0
    assert (r.min_ms, r.max_ms) == (1.0, 5.0)
    assert math.isclose(r.std_ms, math.sqrt(2.5))
    assert math.isclose(r.quantile(0.25), 2.0) and math.isclose(r.quantile(0.1), 1.4)  # linear interpolation
    assert r.host_us == (2.5,) * 5 and r.host_median_us == 2.5  # one clock step around each call
    assert math.isclose(r.gbps, 4e9 / 3e-3 / 1e9)  # bytes / median seconds
    assert math.isclose(r.tflops, 2e12 / 3e-3 / 1e12)
    assert r.name == "<lambda>" and r.n_repeat == 5 and r.n_warmup == 0 and r.flush_l2 is True


def test_default_names():
    class Launcher:
        name = "saxpy"  # a jitbridge kernel's .name

        def __call__(self):
            pass

    class Plain:
        def __call__(self):
            pass

    assert benchmark(Launcher(), n_warmup=0, n_repeat=1, timer=FakeTimer([1.0])).name == "saxpy"
    assert benchmark(Plain(), n_warmup=0, n_repeat=1, timer=FakeTimer([1.0])).name == "Plain"
    assert benchmark(print, n_warmup=0, n_repeat=1, timer=FakeTimer([1.0])).name == "print"


def test_even_count_median_and_no_bytes():
    r = benchmark(lambda: None, n_warmup=0, n_repeat=4, timer=FakeTimer([4.0, 1.0, 2.0, 3.0]), name="k")
    assert r.name == "k"
    assert r.median_ms == 2.5
    assert r.gbps is None and r.tflops is None
    assert "GB/s" not in str(r) and "GB/s" not in repr(r)


def test_call_order_warmup_flush_and_arguments():
    log = []
    f = logging_fn(log, "f")
    benchmark(f, 1, "x", kwargs={"k": 2}, n_warmup=2, n_repeat=2, timer=FakeTimer([1.0, 1.0], log=log))
    call = ("f", (1, "x"), (("k", 2),))
    assert log == [call, call, "sync", "flush", "start", call, "stop", "flush", "start", call, "stop", "read"]
    log.clear()
    benchmark(f, n_warmup=0, n_repeat=1, flush_l2=False, timer=FakeTimer([1.0], log=log))
    assert log == ["sync", "start", ("f", (), ()), "stop", "read"]


def test_round_robin_comparison():
    log = []
    fa, fb, fc = (logging_fn(log, n) for n in "abc")
    # Sample k is variant k % 3: a gets 2, 2, 2; b 1, 1, 1; c 4, 4, 8.
    gpu = [2.0, 1.0, 4.0] * 2 + [2.0, 1.0, 8.0]
    c = benchmark({"a": fa, "b": fb, "c": fc}, n_warmup=1, n_repeat=3, bytes=1e6, timer=FakeTimer(gpu, log=log),
                  flush_l2=False)
    calls = [e[0] for e in log if isinstance(e, tuple)]
    assert calls == ["a", "b", "c"] * 4  # one warm-up round, then three timed rounds
    assert isinstance(c, Comparison) and list(c.results) == ["a", "b", "c"] and len(c) == 3
    assert c.baseline == "a"
    assert c["a"].gpu_ms == (2.0, 2.0, 2.0) and c["b"].gpu_ms == (1.0,) * 3 and c["c"].gpu_ms == (4.0, 4.0, 8.0)
    assert c.ratio("a") == 1.0 and c.ratio("b") == 0.5 and c.ratio("c") == 2.0
    assert c.speedup("b") == 2.0
    assert math.isclose(c["b"].gbps, 1e6 / 1e-3 / 1e9)
    text = str(c)
    assert "time vs a" in text and "0.50x" in text and "2.00x" in text and "round-robin" in text
    html = c._repr_html_()
    assert html.startswith("<table") and "<td>b</td>" in html and "2.00x" in html
    assert "0.50x" in repr(c)
    c2 = benchmark({"a": fa, "b": fb}, n_warmup=0, n_repeat=1, baseline="b", timer=FakeTimer([3.0, 1.5]))
    assert c2.baseline == "b" and c2.ratio("a") == 2.0


def test_text_and_html_renderings_escape_and_units():
    r = benchmark(lambda: None, n_warmup=0, n_repeat=3, timer=FakeTimer([0.0005, 0.002, 1500.0]), name="<k&>",
                  bytes=1000)
    s = str(r)
    assert "2.00 us" in s and "500.0 ns" in s and "1.500 s" in s  # median, min and max in readable units
    assert "3 samples after 0 warm-up calls, L2 flushed before each sample" in s
    h = r._repr_html_()
    assert "&lt;k&amp;&gt;" in h and "<k&>" not in h
    assert repr(r).startswith("<BenchmarkResult <k&>: GPU median 2.00 us")


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(n_warmup=-1), ValueError, "n_warmup: -1"),
    (dict(n_warmup=1.5), TypeError, "n_warmup: expected an int"),
    (dict(n_repeat=0), ValueError, "n_repeat: 0"),
    (dict(n_repeat=True), TypeError, "n_repeat: expected an int, got bool"),
    (dict(bytes=-4), ValueError, "bytes: expected a positive"),
    (dict(bytes="4"), TypeError, "bytes: expected a number"),
    (dict(flops=math.inf), ValueError, "flops: expected a positive finite"),
    (dict(flops=0), ValueError, "flops:"),
    (dict(flush_l2=1), TypeError, "flush_l2: expected True or False"),
    (dict(kwargs=[1]), TypeError, "kwargs: expected a dict"),
    (dict(name=3), TypeError, "name: expected a str"),
    (dict(baseline="a"), ValueError, "baseline: only for a comparison"),
    (dict(stream=1), ValueError, "stream, device"),
])
def test_argument_errors_name_the_argument(kwargs, exc, words):
    log = []
    with pytest.raises(exc, match=words.replace("(", r"\(")):
        benchmark(logging_fn(log, "f"), timer=FakeTimer([1.0] * 200, log=log), **kwargs)
    assert log == []  # refused before anything ran


@pytest.mark.parametrize("fn, exc, words", [
    (3, TypeError, "fn: expected a callable or a dict"),
    ({}, ValueError, "fn: the dict of variants is empty"),
    ({"a": 3}, TypeError, r"fn\['a'\]: expected a callable"),
    ({1: print}, TypeError, "fn: variant names must be str"),
])
def test_fn_errors(fn, exc, words):
    with pytest.raises(exc, match=words):
        benchmark(fn, timer=FakeTimer([1.0] * 200))


def test_comparison_argument_errors():
    fns = {"a": print, "b": print}
    with pytest.raises(ValueError, match=r"baseline: 'z' is not one of the variants \['a', 'b'\]"):
        benchmark(fns, baseline="z", timer=FakeTimer([]))
    with pytest.raises(ValueError, match="name: give the names as the keys"):
        benchmark(fns, name="x", timer=FakeTimer([]))


def test_timer_without_the_methods_and_a_short_timer():
    class Half:
        def start(self):
            pass

    missing = "flush, stop, synchronize, elapsed_ms, host_ns"
    with pytest.raises(TypeError, match=f"timer: Half lacks the method.s. {missing}$"):
        benchmark(print, timer=Half())

    class Short(FakeTimer):
        def elapsed_ms(self):
            return [1.0]

    with pytest.raises(RuntimeError, match="timer: elapsed_ms.. returned 1 samples, expected 3"):
        benchmark(lambda: None, n_warmup=0, n_repeat=3, timer=Short([1.0] * 3))


def test_an_exception_from_fn_propagates():
    def boom():
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        benchmark(boom, n_warmup=0, timer=FakeTimer([1.0] * 100))


def test_quantile_bounds():
    r = benchmark(lambda: None, n_warmup=0, n_repeat=1, timer=FakeTimer([2.0]))
    assert r.quantile(0) == r.quantile(1) == r.median_ms == 2.0 and r.std_ms == 0.0
    with pytest.raises(ValueError, match=r"q: 1.5 is outside \[0, 1\]"):
        r.quantile(1.5)


def test_plots():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = benchmark(lambda: None, n_warmup=0, n_repeat=8, timer=FakeTimer([1.0, 2.0] * 4), name="k")
    ax = r.plot()
    assert ax.get_title() == "k" and "GPU time" in ax.get_xlabel()
    c = benchmark({"a": print, "b": print}, n_warmup=0, n_repeat=4, timer=FakeTimer([1.0, 2.0] * 4))
    ax = c.plot()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["a (1.00x)", "b (2.00x)"]
    plt.close("all")


def test_plot_without_matplotlib_says_so(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    r = benchmark(lambda: None, n_warmup=0, n_repeat=1, timer=FakeTimer([1.0]))
    with pytest.raises(ImportError, match=r"BenchmarkResult.plot\(\) needs matplotlib.*pip install matplotlib"):
        r.plot()


def test_cuda_event_timer_argument_errors():
    # Checked before the driver is needed.
    with pytest.raises(TypeError, match="stream: expected None, an int stream handle, or a stream object"):
        benchmark(print, stream="s")
    with pytest.raises(TypeError, match="device: expected an int"):
        benchmark(print, device="0")
    with pytest.raises(ValueError, match="device: -2 is not a device ordinal"):
        jitbridge.CudaEventTimer(device=-2)


def test_without_a_driver_no_driver_error(gpu_absent_reason):
    called = []
    with pytest.raises(jitbridge.NoDriverError):
        benchmark(lambda: called.append(1))
    assert called == []  # refused before the first call
