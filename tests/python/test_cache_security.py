"""The kernel cache trusts only a private directory (issue 29): the warning's text, what doctor and cache info say,
and that compiles stay correct with the disk side off. Directories of another user need root (CI runs as root)."""

import grp
import json
import os
import pwd
import signal

import pytest

OTHER_UID = 65534  # nobody: neither this process's uid nor root
SOURCE = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }'

COMPILE_TWICE = f"""
import warnings, jitbridge
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    first = jitbridge.compile({SOURCE!r}, arch='sm_90')
    second = jitbridge.compile({SOURCE!r}, arch='sm_90')
print(first.origin, second.origin, first.kernels[0].signature)
print(jitbridge.cache_info()['disk'])
for w in caught:
    print(w.category.__name__, '|', w.message)
"""

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a directory owned by another uid needs root")


def user(uid):
    """The name check_private_directory uses for `uid` in its messages."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def refused(run_python, directory, reason):
    """Compiles twice in a fresh process with `directory`: compiled then from memory, one warning saying `reason`."""
    r = run_python(COMPILE_TWICE, JITBRIDGE_CACHE_DIR=directory)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "compiled memory (float*)"
    assert lines[1] == "False"
    assert lines[2:] == [f"RuntimeWarning | kernel cache directory {directory} is unusable: {reason}; "
                         "caching in memory only"]
    return r


@needs_root
def test_a_directory_owned_by_another_user_is_refused_and_nothing_is_loaded_from_it(run_python, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    # A valid cache there first, then handed to the other user: its entry must not be loaded.
    r = run_python(COMPILE_TWICE, JITBRIDGE_CACHE_DIR=theirs)
    assert r.stdout.splitlines()[:2] == ["compiled memory (float*)", "True"], r.stdout + r.stderr
    entries = sorted(p.name for p in (theirs / "v1").iterdir())
    os.chown(theirs, OTHER_UID, -1)
    refused(run_python, theirs, f"{theirs} is owned by {user(OTHER_UID)}, not by you, {user(os.geteuid())}; "
                                "fix: set JITBRIDGE_CACHE_DIR to a directory of your own")
    assert sorted(p.name for p in (theirs / "v1").iterdir()) == entries  # nothing written there either


def test_group_or_world_writable_directories_are_refused(run_python, tmp_path):
    for mode, who in ((0o770, "group"), (0o702, "others"), (0o777, "group and others")):
        d = tmp_path / f"mode-{mode:o}"
        d.mkdir()
        d.chmod(mode)
        refused(run_python, d, f"{d} is writable by {who} (mode {mode:04o}): they could put files there for this "
                               f"process to load; fix: chmod go-w {d}, or set JITBRIDGE_CACHE_DIR to a directory of "
                               "your own")
        assert not (d / "v1").exists()


def test_an_ancestor_writable_by_others_needs_the_sticky_bit(run_python, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    cache = shared / "me" / "cache"
    refused(run_python, cache, f"{shared} is writable by group and others (mode 0777) without the sticky bit: they "
                               f"can rename what is in it; fix: chmod go-w {shared} (or chmod +t {shared}), or set "
                               "JITBRIDGE_CACHE_DIR to a directory of your own")
    assert not (shared / "me").exists()
    shared.chmod(0o1777)  # as /tmp: accepted, and made private below it
    r = run_python(COMPILE_TWICE, JITBRIDGE_CACHE_DIR=cache)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["compiled memory (float*)", "True"], r.stdout
    again = run_python(COMPILE_TWICE, JITBRIDGE_CACHE_DIR=cache)
    assert again.stdout.splitlines()[0] == "disk memory (float*)", again.stdout
    assert (shared / "me").stat().st_mode & 0o7777 == 0o700


def test_a_symlinked_cache_directory_is_judged_by_where_it_leads(run_python, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "cache").mkdir(mode=0o700)
    shared.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(shared / "cache")
    r = run_python(COMPILE_TWICE, JITBRIDGE_CACHE_DIR=link)
    assert r.stdout.splitlines()[1] == "False", r.stdout
    assert f"kernel cache directory {link} is unusable: {shared} is writable by group and others" in r.stdout


def test_a_symlinked_entry_is_not_loaded(run_python, cache_dir, tmp_path):
    r = run_python(COMPILE_TWICE)
    assert r.stdout.splitlines()[:2] == ["compiled memory (float*)", "True"], r.stdout + r.stderr
    (entry,) = (cache_dir / "v1").glob("*.jbc")
    elsewhere = tmp_path / "elsewhere.jbc"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)  # the same bytes, but through a link: not loaded
    r = run_python(COMPILE_TWICE)
    assert r.stdout.splitlines() == ["compiled memory (float*)", "True"], r.stdout + r.stderr
    assert entry.is_file() and not entry.is_symlink()  # replaced by a real entry


def test_cache_info_and_doctor_say_why_the_disk_is_off(cli, tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    cache = open_dir / "cache"
    reason = (f"{open_dir} is writable by group and others (mode 0777) without the sticky bit: they can rename "
              f"what is in it; fix: chmod go-w {open_dir} (or chmod +t {open_dir}), or set JITBRIDGE_CACHE_DIR to "
              "a directory of your own")
    info = cli("cache", "info", JITBRIDGE_CACHE_DIR=cache)
    assert info.returncode == 0, info.stderr
    assert info.stdout.splitlines()[:2] == [f"directory: {cache}", f"disk:      off: {reason}"]
    assert info.stderr == ""  # said once, in the output, not again as a warning
    doctor = cli("doctor", JITBRIDGE_CACHE_DIR=cache)
    assert f"{cache} (memory only: {reason})" in doctor.stdout, doctor.stdout
    assert "RuntimeWarning" not in doctor.stderr
    report = json.loads(cli("doctor", "--json", JITBRIDGE_CACHE_DIR=cache).stdout)
    assert report["cache"]["disk"] is False
    assert report["cache"]["disk_reason"] == reason
    assert report["cache"]["trust_group"] is None
    assert not cache.exists()  # looking made nothing
    clear = cli("cache", "clear", JITBRIDGE_CACHE_DIR=cache)
    assert clear.stdout.splitlines() == [f"removed 0 entries from {cache}",
                                         f"disk:    off: {reason} (nothing there was touched)"], clear.stdout
    assert clear.stderr == ""
    fine = cli("cache", "info", JITBRIDGE_CACHE_DIR=tmp_path / "fine")
    assert fine.stdout.splitlines()[1] == "disk:      on", fine.stdout


@needs_root
def test_a_trusted_group_may_share_a_group_writable_directory(run_python, cli, tmp_path):
    group = grp.getgrgid(100).gr_name if 100 in {g.gr_gid for g in grp.getgrall()} else grp.getgrgid(1).gr_name
    gid = grp.getgrnam(group).gr_gid
    shared = tmp_path / "project-cache"
    shared.mkdir()
    os.chown(shared, -1, gid)
    shared.chmod(0o2770)
    refused(run_python, shared, f"{shared} is writable by group (mode 2770): they could put files there for this "
                                f"process to load; fix: chmod go-w {shared}, or set JITBRIDGE_CACHE_DIR to a "
                                "directory of your own")
    r = run_python(COMPILE_TWICE, JITBRIDGE_CACHE_DIR=shared, JITBRIDGE_CACHE_TRUST_GROUP=group)
    assert r.stdout.splitlines() == ["compiled memory (float*)", "True"], r.stdout + r.stderr
    (entry,) = (shared / "v1").glob("*.jbc")
    assert entry.stat().st_mode & 0o777 == 0o640  # readable by the group's members
    assert (shared / "v1").stat().st_gid == gid
    info = cli("cache", "info", JITBRIDGE_CACHE_DIR=shared, JITBRIDGE_CACHE_TRUST_GROUP=group)
    assert info.stdout.splitlines()[1] == f"disk:      on (shared with group {group})", info.stdout
    bad = run_python(COMPILE_TWICE, JITBRIDGE_CACHE_DIR=shared, JITBRIDGE_CACHE_TRUST_GROUP="no-such-group-jb")
    assert bad.stdout.splitlines()[2:] == [
        f"RuntimeWarning | kernel cache directory {shared} is unusable: JITBRIDGE_CACHE_TRUST_GROUP='no-such-group-jb' "
        "names no group on this machine; fix: name an existing group, or unset it; caching in memory only"]


def test_nvrtc_traces_are_not_kept_under_an_open_tmpdir(run_python, tmp_path):
    open_tmp = tmp_path / "open-tmp"
    open_tmp.mkdir()
    open_tmp.chmod(0o777)
    headers = tmp_path / "include"
    headers.mkdir()
    (headers / "scale.h").write_text("#define SCALE 3.0f\n")
    code = f"""
import warnings, jitbridge
src = '#include "scale.h"\\nextern "C" __global__ void k(float* x) {{ x[threadIdx.x] *= SCALE; }}'
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    p = jitbridge.compile(src, arch='sm_90', include_paths=[{str(headers)!r}])
    q = jitbridge.compile(src, arch='sm_90', include_paths=[{str(headers)!r}])
print(p.origin, q.origin, p.kernels[0].signature)
for w in caught:
    print(w.category.__name__, '|', w.message)
"""
    r = run_python(code, TMPDIR=open_tmp)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # Without a trace its headers are unknown: correct, but not cached (a second compile runs NVRTC again).
    assert lines[0] == "compiled compiled (float*)"
    assert lines[1:] == [f"RuntimeWarning | NVRTC's header traces cannot be kept in {open_tmp}: {open_tmp} is writable "
                         f"by group and others (mode 0777) without the sticky bit: they can rename what is in it; fix: "
                         f"chmod go-w {open_tmp} (or chmod +t {open_tmp}), or set TMPDIR to a directory of your own; "
                         "compiles that may read headers from outside the toolkit are not cached"]
    assert list(open_tmp.iterdir()) == []  # the refused trace directory was removed
    open_tmp.chmod(0o1777)  # as /tmp: traced, cached
    r = run_python(code, TMPDIR=open_tmp)
    assert r.stdout.splitlines() == ["compiled memory (float*)"], r.stdout + r.stderr


def test_a_killed_process_leaves_no_trace_directory(run_python, tmp_path):
    # A traced compile's directory goes when the compile ends, not at exit: a process that never runs its exit
    # handlers (a pool worker terminated, a SIGKILL) leaves nothing in TMPDIR.
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o700)
    headers = tmp_path / "include"
    headers.mkdir()
    (headers / "scale.h").write_text("#define SCALE 3.0f\n")
    code = f"""
import os, signal, jitbridge
src = '#include "scale.h"\\nextern "C" __global__ void k(float* x) {{ x[threadIdx.x] *= SCALE; }}'
p = jitbridge.compile(src, arch='sm_90', include_paths=[{str(headers)!r}])
q = jitbridge.compile(src, arch='sm_90', include_paths=[{str(headers)!r}])
print(p.origin, q.origin, sorted(os.listdir(os.environ['TMPDIR'])), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    r = run_python(code, TMPDIR=tmp)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert r.stdout.splitlines() == ["compiled memory []"], r.stdout  # traced (so cached) and already gone
    assert list(tmp.iterdir()) == []


def test_precompiled_headers_are_not_kept_under_an_open_tmpdir(run_python, tmp_path):
    # Three cub kernels after one #include: the second makes a PCH of the header prefix, the third uses it, under a
    # TMPDIR that is safe (sticky, as /tmp); under one that others can rename things in, none is made there.
    open_tmp = tmp_path / "open-tmp"
    open_tmp.mkdir()
    code = r"""
import os, warnings, jitbridge
head = '#include <cub/block/block_reduce.cuh>\n'
body = ('extern "C" __global__ void k%d(float* x) { using R = cub::BlockReduce<float, 32>; '
        '__shared__ typename R::TempStorage t; float s = R(t).Sum(x[threadIdx.x]); if (threadIdx.x == 0) x[0] = s; }')
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    programs = [jitbridge.compile(head + body % n, arch='sm_90') for n in (1, 2, 3)]
print([str(p.kernels[0].signature) for p in programs])
tmp = os.environ['TMPDIR']
made = sorted(os.listdir(tmp))
print(sorted(name.split('-')[1] for name in made))
print(sum(f.endswith('.pch') for d in made if d.startswith('jitbridge-pch-') for f in os.listdir(os.path.join(tmp, d))))
for w in caught:
    print(w.category.__name__, '|', w.message)
"""
    open_tmp.chmod(0o1777)
    safe = run_python(code, TMPDIR=open_tmp)
    assert safe.returncode == 0, safe.stderr
    # Between compiles only the PCH directory exists: a trace directory lives for its compile.
    assert safe.stdout.splitlines()[:2] == ["['(float*)', '(float*)', '(float*)']", "['pch']"], safe.stdout
    assert int(safe.stdout.splitlines()[2]) >= 1  # the PCH file, while the process runs
    assert list(open_tmp.iterdir()) == []  # both directories go at exit
    open_tmp.chmod(0o777)
    fresh_cache = tmp_path / "fresh-cache"  # the first run's entries would spare this one every compile
    fresh_cache.mkdir(mode=0o700)
    r = run_python(code, TMPDIR=open_tmp, JITBRIDGE_CACHE_DIR=fresh_cache)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == ["['(float*)', '(float*)', '(float*)']", "[]", "0"], r.stdout
    assert len(lines) == 4 and lines[3].startswith(f"RuntimeWarning | NVRTC's header traces cannot be kept in {open_tmp}")
    assert list(open_tmp.iterdir()) == []
