"""run.py — runs the fuzz targets of tests/fuzz (scripts/fuzz builds them first, then calls this): each for a time
or an execution count, seeded with tests/fuzz/seeds/<target> and tests/fuzz/regressions/<target>, restarted after a
finding while its time lasts; prints the table (executions, exec/s, crashes, sanitizer reports, wrong acceptances,
other findings) and keeps every finding's input under the findings folder. Exits 1 on any finding."""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CPP = ["array_view", "dlpack_managed", "cache_entry", "signature_pack", "launch_config", "nvrtc_outputs"]
PY = ["py_cai", "py_dlpack", "py_from_ptr", "py_launch"]
MARKER = re.compile(r"JB-FUZZ-FINDING: ([a-z-]+): (.*)")


def classify(log):
    """(category, detail) of the finding a run's log shows, or None. Categories: wrong-acceptance, sanitizer,
    crash, hang, oom, and the marker kinds (wrong-refusal, wrong-result, bad-exception, lifetime)."""
    m = MARKER.search(log)
    if m:
        kind = m.group(1)
        return kind, m.group(2)[:600]
    for pattern, category in ((r"ERROR: AddressSanitizer: ([^\n]*)", "sanitizer"),
                              (r"ERROR: LeakSanitizer: ([^\n]*)", "sanitizer"),
                              (r"([^\n]*runtime error: [^\n]*)", "sanitizer"),
                              (r"ERROR: libFuzzer: (timeout[^\n]*)", "hang"),
                              (r"ERROR: libFuzzer: (out-of-memory[^\n]*)", "oom"),
                              (r"=== Uncaught Python exception: ===\n([^\n]*\n?[^\n]*)", "crash"),
                              (r"ERROR: libFuzzer: (deadly signal)", "crash"),
                              (r"ERROR: libFuzzer: (fuzz target exited)", "crash")):
        m = re.search(pattern, log)
        if m:
            if category == "crash" and "Uncaught Python exception" not in pattern:
                tail = re.findall(r"Traceback[\s\S]*?\n(\w+Error[^\n]*|\w+Exception[^\n]*)", log)
                return category, (tail[-1] if tail else m.group(1))[:300]
            return category, m.group(1).strip()[:300]
    return None


def stats(log):
    execs = re.findall(r"stat::number_of_executed_units: (\d+)", log)
    if execs:
        return int(execs[-1])
    done = re.findall(r"#(\d+)\s+(?:DONE|pulse|NEW|REDUCE|INITED)", log)
    return int(done[-1]) if done else 0


def command(target, build, args):
    if target in CPP:
        return [os.path.join(build, "tests", "fuzz", f"fuzz_{target}")] + args
    return [sys.executable, os.path.join(HERE, "python", f"fuzz_{target[3:]}.py")] + args


def environment(target, build, scratch):
    env = dict(os.environ)
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    env["JITBRIDGE_CACHE_DIR"] = os.path.join(scratch, "cache")
    env["TMPDIR"] = scratch
    if target in CPP:
        env["ASAN_OPTIONS"] = "detect_leaks=1:allocator_may_return_null=1"
    else:
        env["LD_PRELOAD"] = os.path.join(build, "tests", "fuzz", "python", "libjitbridge_asan_fuzzer.so")
        env["ASAN_OPTIONS"] = "detect_leaks=0:allocator_may_return_null=1:quarantine_size_mb=64"
        env["PYTHONMALLOC"] = "malloc"  # every object through malloc: ASan sees a freed dict or list item
        env["JITBRIDGE_FUZZ_BUILD"] = build
    env["LD_LIBRARY_PATH"] = os.path.join(build, "tests", "fuzz", "fake_cuda") + \
        (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def fuzz_target(target, opts, findings_dir):
    """Runs one target for its budget; returns its row."""
    row = dict(target=target, executions=0, seconds=0.0, findings=[])
    work = os.path.join(opts.corpus, target)
    os.makedirs(work, exist_ok=True)
    artifacts = os.path.join(findings_dir, target)
    os.makedirs(artifacts, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f"jbfuzz-{target}-")
    fixed = [d for d in (os.path.join(HERE, "seeds", target), os.path.join(HERE, "regressions", target))
             if os.path.isdir(d) and os.listdir(d)]
    excluded = set()  # seed/regression files that failed at start-up (reported once, then left out)
    seen = set()
    deadline = time.time() + opts.seconds_per_target
    runs_left = opts.runs
    for attempt in range(opts.max_restarts + 1):
        left = int(deadline - time.time())
        if opts.runs is None and left < 2 or opts.runs is not None and runs_left <= 0:
            break
        inputs = fixed
        if excluded:
            merged = tempfile.mkdtemp(dir=scratch)
            for d in fixed:
                for name in os.listdir(d):
                    path = os.path.join(d, name)
                    if path not in excluded:
                        shutil.copy(path, os.path.join(merged, f"{os.path.basename(d)}-{name}"))
            inputs = [merged]
        args = [f"-timeout={opts.timeout}", "-rss_limit_mb=3072", "-print_final_stats=1",
                f"-artifact_prefix={artifacts}/", "-close_fd_mask=0", work] + inputs
        args.insert(0, f"-runs={runs_left}" if opts.runs is not None else f"-max_total_time={left}")
        log_path = os.path.join(artifacts, f"log-{attempt}.txt")
        started = time.time()
        hung = False
        with open(log_path, "w") as log_file, open(os.devnull) as devnull:
            try:
                subprocess.run(command(target, opts.build, args), env=environment(target, opts.build, scratch),
                               stdout=log_file, stderr=subprocess.STDOUT, stdin=devnull, cwd=scratch,
                               timeout=(left + 120) if opts.runs is None else None)
            except subprocess.TimeoutExpired:
                hung = True  # not even libFuzzer's own timeout stopped it
        row["seconds"] += time.time() - started
        log = open(log_path, errors="replace").read()
        executed = stats(log)
        row["executions"] += executed
        if runs_left is not None:
            runs_left -= executed
        found = ("hang", "the target did not stop 2 minutes after its time") if hung else classify(log)
        if found is None and executed == 0:
            first = re.search(r"(ERROR[^\n]*|\w+Error[^\n]*)", log)
            found = ("crash", "the target did not run: " + (first.group(1) if first else log[-200:]))
        if found is None:
            break
        crash = re.findall(r"Test unit written to (\S+)", log)
        crash_file = crash[-1] if crash else None
        at_start = "INITED" not in log
        if at_start and crash_file:  # a seed or regression input still fails: name it, leave it out, go on
            digest = hashlib.sha1(open(crash_file, "rb").read()).hexdigest()
            for d in fixed:
                for name in os.listdir(d):
                    path = os.path.join(d, name)
                    if hashlib.sha1(open(path, "rb").read()).hexdigest() == digest:
                        excluded.add(path)
                        found = (found[0], f"{found[1]} [replaying {os.path.relpath(path, ROOT)}]")
            for name in os.listdir(work):  # from an earlier run's corpus: drop it (its copy is kept as the finding)
                path = os.path.join(work, name)
                if hashlib.sha1(open(path, "rb").read()).hexdigest() == digest:
                    os.remove(path)
        what = found[1].split(" | ")[0] if " | " in found[1] else found[1].rsplit(": ", 1)[0]
        key = (found[0], re.sub(r"0x[0-9a-f]+|-?\d+", "N", what.split(" [replaying")[0])[:160])
        if key not in seen:
            seen.add(key)
            row["findings"].append(dict(category=found[0], detail=found[1], input=crash_file, log=log_path))
        if at_start and not crash_file:
            break  # the target could not even start: nothing more to learn by restarting
    shutil.rmtree(scratch, ignore_errors=True)
    return row


def table(rows):
    cols = ["target", "executions", "exec/s", "crashes", "sanitizer", "wrong accept", "other findings"]
    lines = []
    for r in rows:
        cats = [f["category"] for f in r["findings"]]
        crashes = sum(c in ("crash", "hang", "oom") for c in cats)
        sanitizer = cats.count("sanitizer")
        wrong = cats.count("wrong-acceptance")
        other = len(cats) - crashes - sanitizer - wrong
        rate = r["executions"] / r["seconds"] if r["seconds"] else 0
        lines.append([r["target"], f"{r['executions']:,}", f"{rate:,.0f}", str(crashes), str(sanitizer), str(wrong),
                      str(other)])
    total = sum(r["executions"] for r in rows)
    nfind = [sum(int(line[i]) for line in lines) for i in range(3, 7)]
    lines.append(["total", f"{total:,}", "", *map(str, nfind)])
    widths = [max(len(x) for x in col) for col in zip(cols, *lines)]
    fmt = lambda row: "  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(row, widths)))
    out = [fmt(cols), fmt(["-" * w for w in widths])] + [fmt(line) for line in lines]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--build", default=os.path.join(ROOT, "build-fuzz"))
    p.add_argument("--seconds-per-target", type=int, default=60)
    p.add_argument("--runs", type=int, default=None, help="an execution count per target instead of a time")
    p.add_argument("--targets", default=",".join(CPP + PY), help="comma-separated, of: " + ", ".join(CPP + PY))
    p.add_argument("--findings", default=None, help="where finding inputs and logs go (default: "
                                                      "<build>/fuzz-findings/<date-time>)")
    p.add_argument("--corpus", default=None, help="working corpora, kept between runs (default: <build>/fuzz-corpus)")
    p.add_argument("--timeout", type=int, default=10, help="seconds one input may take")
    p.add_argument("--max-restarts", type=int, default=4)
    opts = p.parse_args()
    opts.build = os.path.abspath(opts.build)
    opts.corpus = opts.corpus or os.path.join(opts.build, "fuzz-corpus")
    findings_dir = os.path.abspath(opts.findings or os.path.join(opts.build, "fuzz-findings",
                                                                 time.strftime("%Y%m%d-%H%M%S")))
    targets = [t for t in opts.targets.split(",") if t]
    unknown = [t for t in targets if t not in CPP + PY]
    if unknown:
        p.error(f"unknown targets: {', '.join(unknown)}")
    rows = []
    for t in targets:
        print(f"[fuzz] {t} ...", flush=True)
        rows.append(fuzz_target(t, opts, findings_dir))
        for f in rows[-1]["findings"]:
            print(f"[fuzz]   {f['category']}: {f['detail']}\n[fuzz]     input: {f['input']}  log: {f['log']}",
                  flush=True)
    print("\n[fuzz] summary")
    print(table(rows))
    findings = [f for r in rows for f in r["findings"]]
    with open(os.path.join(findings_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(f"\n[fuzz] {len(findings)} finding(s); inputs and logs under {findings_dir}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
