"""What jitbridge.benchmark returns: BenchmarkResult (one callable's samples and statistics) and Comparison (several,
measured round-robin, with ratios to a baseline); text, HTML (notebooks) and matplotlib plots of them."""

import html
import math

__all__ = ["BenchmarkResult", "Comparison", "quantile"]


def quantile(values, q):
    """The q-quantile (0 <= q <= 1) of ``values`` by linear interpolation between the closest ranks (NumPy's
    default method). Raises ValueError for an empty sequence or q outside [0, 1]."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q: {q} is outside [0, 1]")
    s = sorted(values)
    if not s:
        raise ValueError("quantile of no values")
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _fmt_time_ms(ms):
    """A duration given in milliseconds, in the unit that reads best (ns, us, ms, s)."""
    if ms is None:
        return "n/a"
    if ms < 1e-3:
        return f"{ms * 1e6:.1f} ns"
    if ms < 1.0:
        return f"{ms * 1e3:.2f} us"
    if ms < 1e3:
        return f"{ms:.3f} ms"
    return f"{ms / 1e3:.3f} s"


def _pyplot(what):
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(f"{what} needs matplotlib, which is not installed (pip install matplotlib)") from e
    return plt


class BenchmarkResult:
    """One callable's timing: ``n_repeat`` samples of GPU time (CUDA events on the stream) and of host time per call.

    gpu_ms     the samples' GPU times in milliseconds (tuple, in the order taken).
    host_us    the host time of each call, in microseconds (the call alone: from just before it to its return).
    median_ms, mean_ms, min_ms, max_ms, std_ms   statistics of gpu_ms; quantile(q) any other.
    host_median_us   the median of host_us.
    gbps, tflops     achieved GB/s (bytes / median) and TFLOP/s (flops / median), or None when bytes= / flops= were
                     not given.
    name, n_warmup, n_repeat, bytes, flops, flush_l2, stream   what was measured and how.

    ``str()``/``repr()`` give a one-line summary, ``_repr_html_`` a table in notebooks, ``plot()`` a histogram.
    """

    __module__ = "jitbridge"

    def __init__(self, name, gpu_ms, host_us, *, n_warmup, n_repeat, bytes=None, flops=None, flush_l2=False,
                 stream=None):
        """The samples of one measurement (benchmark() makes these): ``gpu_ms`` and ``host_us`` one value per
        sample each, the other arguments the fields of the same names. Raises ValueError when there are no GPU
        samples or the two counts differ."""
        self.name = name
        self.gpu_ms = tuple(float(v) for v in gpu_ms)
        self.host_us = tuple(float(v) for v in host_us)
        if not self.gpu_ms or len(self.gpu_ms) != len(self.host_us):
            raise ValueError(f"{name}: {len(self.gpu_ms)} GPU samples and {len(self.host_us)} host samples")
        self.n_warmup = n_warmup
        self.n_repeat = n_repeat
        self.bytes = bytes
        self.flops = flops
        self.flush_l2 = flush_l2
        self.stream = stream

    def quantile(self, q):
        """The q-quantile of the GPU times in ms (q=0.5: the median). Raises ValueError for q outside [0, 1]."""
        return quantile(self.gpu_ms, q)

    @property
    def median_ms(self):
        """The median GPU time in ms: the headline number (a preempted or throttled sample does not move it)."""
        return quantile(self.gpu_ms, 0.5)

    @property
    def mean_ms(self):
        """The mean GPU time in ms."""
        return math.fsum(self.gpu_ms) / len(self.gpu_ms)

    @property
    def min_ms(self):
        """The fastest sample's GPU time in ms."""
        return min(self.gpu_ms)

    @property
    def max_ms(self):
        """The slowest sample's GPU time in ms."""
        return max(self.gpu_ms)

    @property
    def std_ms(self):
        """The sample standard deviation of the GPU times (0.0 for one sample)."""
        n = len(self.gpu_ms)
        if n < 2:
            return 0.0
        m = self.mean_ms
        return math.sqrt(math.fsum((v - m) ** 2 for v in self.gpu_ms) / (n - 1))

    @property
    def host_median_us(self):
        """The median host time per call in microseconds (the call alone: launch overhead, Python included)."""
        return quantile(self.host_us, 0.5)

    @property
    def gbps(self):
        """bytes / median GPU time, in GB/s (10**9 bytes per second); None without bytes=."""
        if self.bytes is None or self.median_ms <= 0:
            return None
        return self.bytes / (self.median_ms * 1e-3) / 1e9

    @property
    def tflops(self):
        """flops / median GPU time, in TFLOP/s (10**12 per second); None without flops=."""
        if self.flops is None or self.median_ms <= 0:
            return None
        return self.flops / (self.median_ms * 1e-3) / 1e12

    def _row(self):
        """The table cells: name, GPU median, p10-p90, min-max, host median, GB/s, TFLOP/s."""
        return [self.name, _fmt_time_ms(self.median_ms),
                f"{_fmt_time_ms(self.quantile(0.1))} - {_fmt_time_ms(self.quantile(0.9))}",
                f"{_fmt_time_ms(self.min_ms)} - {_fmt_time_ms(self.max_ms)}",
                _fmt_time_ms(self.host_median_us * 1e-3),
                "" if self.gbps is None else f"{self.gbps:.1f}",
                "" if self.tflops is None else f"{self.tflops:.2f}"]

    def _settings(self):
        flush = "L2 flushed before each sample" if self.flush_l2 else "no L2 flush"
        return f"{self.n_repeat} samples after {self.n_warmup} warm-up calls, {flush}"

    def __repr__(self):
        """One line: the GPU median, spreads and host time per call, and the sampling settings."""
        r = self._row()
        extra = "".join(f", {v} {unit}" for v, unit in ((r[5], "GB/s"), (r[6], "TFLOP/s")) if v)
        return (f"<BenchmarkResult {self.name}: GPU median {r[1]} (p10-p90 {r[2]}, min-max {r[3]}), host {r[4]} per "
                f"call{extra}; {self._settings()}>")

    def __str__(self):
        """A table of one row: GPU median, spreads, host time per call; the settings below it."""
        return _text_table([self._row()], _HEADERS, self._settings())

    def _repr_html_(self):
        return _html_table([self._row()], _HEADERS, self._settings())

    def plot(self, ax=None):
        """A histogram of the GPU times (matplotlib, imported now); returns the Axes. ``ax``: draw into this one
        (default: a new figure). Raises ImportError naming matplotlib when it is not installed."""
        plt = _pyplot("BenchmarkResult.plot()")
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        ax.hist([v * 1e3 for v in self.gpu_ms], bins=min(50, max(5, len(self.gpu_ms) // 4)), color="#4c72b0")
        ax.axvline(self.median_ms * 1e3, color="black", linestyle="--", label=f"median {_fmt_time_ms(self.median_ms)}")
        ax.set_xlabel("GPU time per call (us)")
        ax.set_ylabel("samples")
        ax.set_title(self.name)
        ax.legend()
        return ax


_HEADERS = ["name", "GPU median", "p10 - p90", "min - max", "host/call", "GB/s", "TFLOP/s"]


class Comparison:
    """Several callables measured round-robin by jitbridge.benchmark({name: fn, ...}): sample i of every variant is
    taken before sample i + 1 of any, so that drift (clocks, other processes) hits them alike.

    results    dict name -> BenchmarkResult, in the order given.
    baseline   the name the ratios are taken against (the first variant unless benchmark(baseline=) said).
    ratio(name)    median GPU time of ``name`` / that of the baseline (below 1: faster than the baseline).
    speedup(name)  the inverse: baseline / name.

    ``str()`` is a table, ``_repr_html_`` the same in notebooks, ``plot()`` a box plot of the variants.
    """

    __module__ = "jitbridge"

    def __init__(self, results, baseline=None):
        """``results``: a mapping (or pairs) of name to BenchmarkResult, in the order to show; ``baseline``: the
        name the ratios are taken against (None: the first). Raises ValueError for no results, KeyError for a
        baseline that is not one of them. benchmark({...}) makes these."""
        self.results = dict(results)
        if not self.results:
            raise ValueError("a Comparison needs at least one result")
        self.baseline = next(iter(self.results)) if baseline is None else baseline
        if self.baseline not in self.results:
            raise KeyError(f"baseline: {self.baseline!r} is not one of {list(self.results)}")

    def __getitem__(self, name):
        """The BenchmarkResult of variant ``name`` (KeyError for an unknown one)."""
        return self.results[name]

    def __iter__(self):
        """The BenchmarkResults, in the order the variants were given."""
        return iter(self.results.values())

    def __len__(self):
        """The number of variants."""
        return len(self.results)

    def ratio(self, name):
        """Median GPU time of ``name`` divided by the baseline's. Raises KeyError for an unknown name."""
        base = self.results[self.baseline].median_ms
        return math.inf if base <= 0 else self.results[name].median_ms / base

    def speedup(self, name):
        """Baseline median GPU time divided by that of ``name`` (above 1: ``name`` is faster)."""
        r = self.ratio(name)
        return math.inf if r <= 0 else 1.0 / r

    def _rows(self):
        return [r._row() + [f"{self.ratio(name):.2f}x"] for name, r in self.results.items()]

    def _headers(self):
        return _HEADERS + [f"time vs {self.baseline}"]

    def _settings(self):
        return next(iter(self.results.values()))._settings() + " each, round-robin"

    def __repr__(self):
        """One line: each result's GPU median and its time ratio to the baseline (2.0x: twice the baseline's time)."""
        parts = ", ".join(f"{name}: {_fmt_time_ms(r.median_ms)} ({self.ratio(name):.2f}x)"
                          for name, r in self.results.items())
        return f"<Comparison of {len(self.results)} (GPU medians vs {self.baseline}): {parts}>"

    def __str__(self):
        """A table of one row per result with its time ratio to the baseline; the settings below it."""
        return _text_table(self._rows(), self._headers(), self._settings())

    def _repr_html_(self):
        return _html_table(self._rows(), self._headers(), self._settings())

    def plot(self, ax=None):
        """A box plot of each variant's GPU times (whiskers: p10 and p90), one row per variant, with its ratio to
        the baseline; returns the matplotlib Axes. ``ax``: draw into this one (default: a new figure). Raises
        ImportError naming matplotlib when it is not installed."""
        plt = _pyplot("Comparison.plot()")
        names = list(self.results)
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 0.6 * len(names) + 1.5))
        data = [[v * 1e3 for v in self.results[n].gpu_ms] for n in names]
        try:
            ax.boxplot(data, orientation="horizontal", whis=(10, 90), showfliers=False)
        except TypeError:  # matplotlib before 3.10
            ax.boxplot(data, vert=False, whis=(10, 90), showfliers=False)
        ax.set_yticks(range(1, len(names) + 1))
        ax.set_yticklabels([f"{n} ({self.ratio(n):.2f}x)" for n in names])
        ax.invert_yaxis()
        ax.set_xlabel(f"GPU time per call (us); ratios: median vs {self.baseline}")
        return ax


def _text_table(rows, headers, note):
    keep = [i for i in range(len(headers)) if any(r[i] for r in rows)]  # drop empty GB/s / TFLOP/s columns
    cells = [[headers[i] for i in keep]] + [[str(r[i]) for i in keep] for r in rows]
    widths = [max(len(c[j]) for c in cells) for j in range(len(keep))]
    lines = ["  ".join(c[j].ljust(widths[j]) for j in range(len(keep))).rstrip() for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + [f"({note})"])


def _html_table(rows, headers, note):
    keep = [i for i in range(len(headers)) if any(r[i] for r in rows)]
    head = "".join(f"<th>{html.escape(headers[i])}</th>" for i in keep)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r[i]))}</td>" for i in keep) + "</tr>" for r in rows)
    return (f"<table class=\"jitbridge-benchmark\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<p><small>{html.escape(note)}</small></p>")
