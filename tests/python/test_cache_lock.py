"""Compiling once across processes (no GPU: NVRTC runs on the CPU): 8 processes started together on a new kernel make
exactly 1 NVRTC compile and get the same binary; waiters take over from a lock holder killed with SIGKILL; a wait past
JITBRIDGE_CACHE_LOCK_TIMEOUT compiles itself; an unwritable cache directory or an unusable lock file leaves each
process compiling alone, without an error or a hang. Each process reports jitbridge.cache_info()'s counters."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import package_env

RANKS = 8
# A hang guard for waiting on child processes and files they make (far above what any step takes, even under ASan on
# 2 busy cores); no assertion depends on how fast anything is.
BOUND_S = 240

# A rank: imports jitbridge, says it is ready, waits for the gate file (all ranks start compiling together), compiles
# the source it is given and prints what cache_info() counted, the program's origin and a digest of its cubin
# (Program.cubin: a second cache entry, built without the layout probe, unless RANK_BYTES=0).
RANK = r'''
import hashlib, json, os, sys, time
import jitbridge
gate, ready, source_path = sys.argv[1:4]
source = open(source_path).read()
open(ready, "w").close()
while gate and not os.path.exists(gate):
    time.sleep(0.001)
program = jitbridge.compile(source, arch="sm_90")
info = jitbridge.cache_info()
print(json.dumps({k: info[k] for k in ("compiles", "lock_waits", "lock_timeouts", "disk")} |
                 {"origin": program.origin,
                  "cubin": hashlib.sha256(program.cubin).hexdigest() if os.environ.get("RANK_BYTES") != "0" else ""}))
'''

# A rank that links: compiles a caller and a callee for separate compilation (the source file holds both, split at
# "//--"), links them, and prints the counters and a digest of the linked cubin.
LINK_RANK = r'''
import hashlib, json, os, sys, time
import jitbridge
gate, ready, source_path = sys.argv[1:4]
caller, callee = open(source_path).read().split("//--\n")
open(ready, "w").close()
while not os.path.exists(gate):
    time.sleep(0.001)
programs = [jitbridge.compile(s, options=["-dc"], arch="sm_90") for s in (caller, callee)]
linked = jitbridge.link(*programs)
info = jitbridge.cache_info()
print(json.dumps({k: info[k] for k in ("compiles", "links", "lock_waits", "lock_timeouts")} |
                 {"cubin": hashlib.sha256(linked.cubin).hexdigest()}))
'''


def small_kernel():
    """A kernel no cache has seen (the tag makes the key new)."""
    return (f'extern "C" __global__ void scale_{uuid.uuid4().hex}(float* x, float a, int n) {{\n'
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (i < n) x[i] = a * x[i] + 1.0f;\n}\n")


def slow_kernel():
    """A new kernel that takes NVRTC a second or more (cub's 600 headers): long enough to catch its compiler holding
    the lock."""
    return ("#include <cub/block/block_reduce.cuh>\n"
            'extern "C" __global__ void block_sum(const float* x, float* out) {\n'
            "  using R = cub::BlockReduce<float, 128>;\n"
            "  __shared__ typename R::TempStorage t;\n"
            "  float v = R(t).Sum(x[blockIdx.x * 128 + threadIdx.x]);\n"
            "  if (threadIdx.x == 0) out[blockIdx.x] = v;\n"
            f"}}\n// {uuid.uuid4().hex}\n")


def wait_until(condition, what):
    """Polls `condition` until it holds; fails the test past BOUND_S (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + BOUND_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {BOUND_S} s waiting for {what}")
        time.sleep(0.002)


class Ranks:
    """Child processes running RANK on one source with one cache directory."""

    def __init__(self, tmp_path, cache_dir, source, script=RANK, **env):
        self.script = script
        self.tmp = tmp_path / f"ranks-{uuid.uuid4().hex[:8]}"
        self.tmp.mkdir()
        self.source = self.tmp / "kernel.cu"
        self.source.write_text(source)
        # The ranks' TMPDIR, private (0700) under tmp_path: what a rank killed before its exit handlers leaves there
        # (NVRTC's trace directory) is not left in /tmp.
        tmpdir = tmp_path / "tmpdir"
        tmpdir.mkdir(mode=0o700, exist_ok=True)
        self.env = package_env(cache_dir, TMPDIR=tmpdir, **env)
        self.procs = []

    def start(self, n, gated=True, **env):
        gate = str(self.tmp / "go") if gated else ""
        first = len(self.procs)
        for i in range(first, first + n):
            self.procs.append(subprocess.Popen(
                [sys.executable, "-c", self.script, gate, str(self.tmp / f"ready-{i}"), str(self.source)],
                cwd=self.tmp, env=self.env | {k: str(v) for k, v in env.items()}, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True))
        return self.procs[first:]

    def open_gate(self):
        """Once every rank is ready (jitbridge imported), lets them all compile at once; fails on a rank that ended."""
        def ready():
            for p in self.procs:
                if p.poll() is not None:
                    pytest.fail(f"a rank ended before the gate opened (exit {p.returncode}): {p.communicate()[1]}")
            return all((self.tmp / f"ready-{i}").exists() for i in range(len(self.procs)))

        wait_until(ready, "the ranks to import jitbridge")
        (self.tmp / "go").touch()

    def results(self, procs=None):
        """Each rank's report; fails on a rank that exits non-zero or runs past BOUND_S."""
        out = []
        for p in procs or self.procs:
            try:
                stdout, stderr = p.communicate(timeout=BOUND_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                pytest.fail(f"a rank did not finish within {BOUND_S} s")
            assert p.returncode == 0, stderr
            report = json.loads(stdout.strip().splitlines()[-1])
            report["stderr"] = stderr
            out.append(report)
        return out

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


@pytest.fixture
def ranks(tmp_path, cache_dir):
    made = []

    def make(source, directory=None, script=RANK, **env):
        r = Ranks(tmp_path, directory or cache_dir, source, script, **env)
        made.append(r)
        return r

    yield make
    for r in made:
        r.kill_all()


def test_eight_processes_starting_together_make_one_compile_and_share_its_binary(ranks, cache_dir):
    group = ranks(small_kernel())
    group.start(RANKS)
    group.open_gate()
    reports = group.results()
    assert sum(r["compiles"] for r in reports) == 1, reports
    assert len({r["cubin"] for r in reports}) == 1
    assert all(r["disk"] and r["lock_timeouts"] == 0 for r in reports)
    # The compiler's program is "compiled"; every other rank read its entry.
    assert sorted(r["origin"] for r in reports) == ["compiled"] + ["disk"] * (RANKS - 1)
    # The program and its probe-free build for Program.cubin (test_output_symbols.py), each stored once.
    assert len(list((cache_dir / "v1").glob("*.jbc"))) == 2
    # The lock files stay, saying their last holder stored the entry.
    locks = list((cache_dir / "v1").glob("*.lock"))
    assert len(locks) == 2 and all(lock.read_text() == "done\n" for lock in locks)


def test_eight_processes_linking_together_make_one_link_and_one_compile_per_program(ranks):
    tag = uuid.uuid4().hex
    caller = (f"extern __device__ float scale_{tag}(float x);\n"
              "__global__ void apply(const float* in, float* out, int n) {\n"
              f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = scale_{tag}(in[i]);\n}}\n")
    callee = f"__device__ float scale_{tag}(float x) {{ return 3.0f * x + 1.0f; }}\n"
    group = ranks(caller + "//--\n" + callee, script=LINK_RANK)
    group.start(RANKS)
    group.open_gate()
    reports = group.results()
    assert sum(r["compiles"] for r in reports) == 2, reports  # the caller once, the callee once
    assert sum(r["links"] for r in reports) == 1, reports
    assert len({r["cubin"] for r in reports}) == 1
    assert all(r["lock_timeouts"] == 0 for r in reports)


def flock_holders(path):
    """Pids holding an flock on `path`, from /proc/locks ("1: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> ...")."""
    inode = os.stat(path).st_ino
    pids = set()
    with open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].split(":")[-1] == str(inode):
                pids.add(int(fields[4]))
    return pids


def stop_a_holder(ranks, cache_dir):
    """A rank compiling a slow new kernel, stopped (SIGSTOP) while it holds that key's lock. Returns (group, holder
    process, lock path). Tries again with a new kernel in the unlikely case the compile ends before it is caught."""
    if not os.path.exists("/proc/locks"):
        pytest.skip("no /proc/locks to see who holds a lock")
    for _ in range(3):
        group = ranks(slow_kernel())
        (holder,) = group.start(1, gated=False)
        entries = cache_dir / "v1"
        wait_until(lambda: holder.poll() is not None or any(entries.glob("*.lock")), "the holder's lock file")
        locks = [p for p in entries.glob("*.lock") if not p.with_suffix(".jbc").exists()]
        if holder.poll() is None and locks:
            lock = locks[0]
            wait_until(lambda: holder.poll() is not None or holder.pid in flock_holders(lock), "the holder's flock")
            os.kill(holder.pid, signal.SIGSTOP)
            if holder.pid in flock_holders(lock) and not lock.with_suffix(".jbc").exists():
                return group, holder, lock
            os.kill(holder.pid, signal.SIGCONT)
        group.results([holder])
    pytest.fail("three slow compiles all ended before their lock could be caught held")


def has_open(pid, path):
    """Whether process `pid` has `path` open (a waiter keeps the lock file open while it waits)."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        return any(os.readlink(os.path.join(fd_dir, fd)) == str(path) for fd in os.listdir(fd_dir))
    except OSError:  # the process is gone, or a descriptor closed while being read
        return False


def test_waiters_take_over_from_a_lock_holder_killed_while_holding(ranks, cache_dir):
    group, holder, lock = stop_a_holder(ranks, cache_dir)
    # A timeout far beyond the bound: only the kernel dropping the dead holder's flock can let them through.
    waiters = group.start(RANKS - 1, gated=False, JITBRIDGE_CACHE_LOCK_TIMEOUT=3600)
    wait_until(lambda: all(has_open(w.pid, lock) for w in waiters), "every waiter to wait on the lock")
    assert lock.read_text().startswith(f"compiling pid {holder.pid} ")
    holder.kill()  # SIGKILL, while stopped and holding the lock
    holder.communicate()
    reports = group.results(waiters)  # each within BOUND_S, or the test fails
    assert sum(r["compiles"] for r in reports) == 1, reports  # one took over, the others waited for it
    assert all(r["lock_waits"] == 1 and r["lock_timeouts"] == 0 for r in reports), reports
    assert len({r["cubin"] for r in reports}) == 1
    assert lock.with_suffix(".jbc").exists()
    assert lock.read_text() == "done\n"


def test_a_wait_past_the_lock_timeout_compiles_itself_and_zero_never_waits(ranks, cache_dir):
    group, holder, lock = stop_a_holder(ranks, cache_dir)
    try:
        (timed,) = group.results(group.start(1, gated=False, JITBRIDGE_CACHE_LOCK_TIMEOUT=0.2))
        assert (timed["compiles"], timed["lock_waits"], timed["lock_timeouts"]) == (1, 1, 1)
        assert timed["origin"] == "compiled"
        # It stored its entry; without it the key is new again, and the lock still held.
        lock.with_suffix(".jbc").unlink()
        (never,) = group.results(group.start(1, gated=False, JITBRIDGE_CACHE_LOCK_TIMEOUT=0))
        assert (never["compiles"], never["lock_waits"], never["lock_timeouts"]) == (1, 1, 0)
        assert never["cubin"] == timed["cubin"]
    finally:
        holder.kill()
        holder.communicate()


@pytest.mark.parametrize("timeout", ["-1", "soon", "nan", "1e99"])
def test_a_bad_lock_timeout_warns_and_keeps_the_default(ranks, timeout):
    group = ranks(small_kernel(), JITBRIDGE_CACHE_LOCK_TIMEOUT=timeout)
    group.start(1, gated=False)
    (report,) = group.results()
    assert report["compiles"] == 1
    assert f"JITBRIDGE_CACHE_LOCK_TIMEOUT='{timeout}' is not a number of seconds from 0 to 1e9; using 300" in \
        report["stderr"]


def unwritable(kind, tmp_path):
    """A cache directory jitbridge cannot write, even as root."""
    if kind == "under_a_file":  # mkdir fails with ENOTDIR whoever runs it
        blocker = tmp_path / "a-file"
        blocker.write_text("not a directory\n")
        return blocker / "cache", lambda: None
    directory = tmp_path / "read-only-cache"
    directory.mkdir()
    if os.geteuid() != 0:
        directory.chmod(0o500)
        return directory, lambda: directory.chmod(0o700)
    # root ignores permission bits, not the immutable attribute (ext4, xfs, btrfs, tmpfs 6.0+).
    made = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"running as root and chattr +i is not available here: {made.stderr.strip()}")
    return directory, lambda: subprocess.run(["chattr", "-i", str(directory)], check=True)


@pytest.mark.parametrize("kind", ["under_a_file", "read_only"])
def test_an_unwritable_cache_directory_leaves_each_process_compiling_alone(ranks, tmp_path, kind):
    directory, undo = unwritable(kind, tmp_path)
    try:
        group = ranks(small_kernel(), directory=directory)
        group.start(RANKS)
        group.open_gate()
        reports = group.results()
    finally:
        undo()
    assert all(r["compiles"] == 1 and r["origin"] == "compiled" and not r["disk"] for r in reports), reports
    assert all(r["lock_waits"] == 0 for r in reports)
    assert len({r["cubin"] for r in reports}) == 1
    for r in reports:  # one warning each, naming the directory
        assert r["stderr"].count("caching in memory only") == 1, r["stderr"]
        assert str(directory) in r["stderr"]


def test_a_lock_path_that_is_a_directory_leaves_each_process_compiling_alone(ranks, tmp_path, cache_dir):
    source = small_kernel()
    # The key: the entry's name when the same source is compiled into another directory.
    probe = ranks(source, directory=tmp_path / "probe-cache", RANK_BYTES=0)  # only the program's own entry
    probe.start(1, gated=False)
    probe.results()
    (entry,) = (tmp_path / "probe-cache" / "v1").glob("*.jbc")
    (cache_dir / "v1" / entry.with_suffix(".lock").name).mkdir(parents=True)
    group = ranks(source)
    group.start(RANKS)
    group.open_gate()
    reports = group.results()
    assert all(r["lock_waits"] == 0 for r in reports)  # nobody waits on what cannot be locked
    assert 1 <= sum(r["compiles"] for r in reports) <= RANKS
    assert len({r["cubin"] for r in reports}) == 1
    assert (cache_dir / "v1" / entry.name).is_file()  # the entry is still stored
