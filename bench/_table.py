"""_table.py — shared helpers for the bench scripts: which jitbridge to measure (build tree or installed), timing,
printing tables."""
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_dir():
    d = os.environ.get("JITBRIDGE_BUILD_DIR", "build")
    return d if os.path.isabs(d) else os.path.join(ROOT, d)


def build_python_dir():
    """The build tree's python/ folder when the benches should use it, else None (the installed package).

    The build tree is used when it holds a built package and JITBRIDGE_BENCH_INSTALLED is not 1; otherwise
    ``import jitbridge`` finds whatever is installed in the running interpreter (pip install . / a wheel)."""
    if os.environ.get("JITBRIDGE_BENCH_INSTALLED") == "1":
        return None
    d = os.path.join(build_dir(), "python")
    return d if os.path.isdir(os.path.join(d, "jitbridge")) else None


def use_jitbridge():
    """Puts the chosen jitbridge first on sys.path (see build_python_dir) and returns a line saying which one
    the bench measures; raises ImportError naming both places when neither has it."""
    d = build_python_dir()
    if d and d not in sys.path:
        sys.path.insert(0, d)
    try:
        import jitbridge
    except ImportError as e:
        raise ImportError(f"jitbridge is neither built in {build_dir()} nor installed for {sys.executable}: {e}")
    where = "build tree" if d else "installed package"
    line = f"jitbridge {jitbridge.__version__} ({where}: {os.path.dirname(jitbridge.__file__)})"
    _JSON_META["jitbridge"] = line
    return line


def cpp_bench(name):
    """Path of the C++ benchmark executable `name` in the build tree, or None when it is not built (an installed
    package has no C++ benches; the tables then mark those rows n/a)."""
    exe = os.path.join(build_dir(), "bench", name)
    return exe if os.access(exe, os.X_OK) else None


def testing_hooks():
    """The build tree's test-only module jitbridge_testing (the launch benchmarks' floors: raw_launch_batch, prepared,
    launch_phases), or None when it is not built or the installed package is measured (those rows are then n/a)."""
    if build_python_dir() is None:
        return None
    d = os.path.join(build_dir(), "python_testing")
    if not os.path.isdir(d):
        return None
    if d not in sys.path:
        sys.path.append(d)
    try:
        import jitbridge_testing
    except ImportError:
        return None
    return jitbridge_testing


def child_env(**extra):
    """The environment for a child interpreter that imports the same jitbridge as this process."""
    env = dict(os.environ)
    d = build_python_dir()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (d, env.get("PYTHONPATH")) if p)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_child(code, **env):
    """Runs `code` in a fresh interpreter; returns the float it prints last (microseconds)."""
    out = subprocess.run([sys.executable, "-c", code], env=child_env(**env), capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "child failed")
    return float(out.stdout.strip().splitlines()[-1])


def median_us(fn, repeat=15, number=1):
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) * 1e6 / number)
    return statistics.median(samples)


def print_table(title, headers, rows, key=None):
    """Prints a table; with JITBRIDGE_BENCH_JSON=path also records it in that JSON file (record_table), under `key`
    (a stable name for bench/plot.py; default: one made from the title), after printing it."""
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    print(f"\n{title}")
    print(line)
    print("  ".join(str(h).ljust(w) for h, w in zip(headers, widths)))
    print(line)
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    print(line)
    record_table(title, headers, rows, key)


def fmt_us(us):
    if us is None:
        return "n/a"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.2f} us"


# ---- the tables as JSON (JITBRIDGE_BENCH_JSON=path), for bench/plot.py --------------------------------------------

JSON_FORMAT = "jitbridge-bench-tables/1"
_JSON_META = {}


def table_key(title):
    """A key made from a title: lower case words joined by '_' (numbers dropped, so that it stays stable)."""
    words = re.findall(r"[a-z]+", title.lower())
    return "_".join(words[:8]) or "table"


def _device_name():
    jb = sys.modules.get("jitbridge")
    try:
        devices = jb.driver_info()["devices"] if jb else []
        return devices[0]["name"] if devices else None
    except Exception:  # no driver: the tables are still recorded
        return None


def record_table(title, headers, rows, key=None, path=None):
    """Adds a table to the JSON file `path` (default: $JITBRIDGE_BENCH_JSON; nothing is done when neither is set).
    The file holds {"format", "tables": [{"key", "title", "headers", "rows" (cells as printed, str), "script",
    "jitbridge", "device", "time"}]}; a table whose key is already there replaces it, others are appended, so that
    several bench scripts fill one file. Raises ValueError naming the file when it exists but is not such a file."""
    path = path or os.environ.get("JITBRIDGE_BENCH_JSON")
    if not path:
        return None
    data = {"format": JSON_FORMAT, "tables": []}
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except ValueError as e:
                raise ValueError(f"JITBRIDGE_BENCH_JSON={path}: not a JSON file ({e}); remove it or name another")
        if not isinstance(data, dict) or data.get("format") != JSON_FORMAT or not isinstance(data.get("tables"), list):
            raise ValueError(f"JITBRIDGE_BENCH_JSON={path}: not a jitbridge bench file (format {JSON_FORMAT!r})")
    key = key or table_key(title)
    entry = {"key": key, "title": title, "headers": [str(h) for h in headers],
             "rows": [[str(c) for c in r] for r in rows], "script": os.path.basename(sys.argv[0] or "?"),
             "jitbridge": _JSON_META.get("jitbridge"), "device": _device_name(),
             "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    data["tables"] = [t for t in data["tables"] if t.get("key") != key] + [entry]
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)  # whole or not at all
    return entry
