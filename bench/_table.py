"""_table.py — shared helpers for the bench scripts: locating the build, timing, printing tables."""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_dir():
    d = os.environ.get("JITBRIDGE_BUILD_DIR", "build")
    return d if os.path.isabs(d) else os.path.join(ROOT, d)


def child_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.join(build_dir(), "python"), env.get("PYTHONPATH")) if p)
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


def print_table(title, headers, rows):
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    print(f"\n{title}")
    print(line)
    print("  ".join(str(h).ljust(w) for h, w in zip(headers, widths)))
    print(line)
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    print(line)


def fmt_us(us):
    if us is None:
        return "n/a"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.2f} us"
