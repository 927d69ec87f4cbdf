"""test_threads.py — 8 Python threads compiling, racing the cache, packing arguments (and, with a GPU, launching)
at once; every result must equal what a serial run gives.

The threads are released together by a barrier, and the packing test meets a second barrier inside an argument's
__index__, so that all 8 packs are half done at the same moment (no sleeps, no timing)."""
import struct
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

import jitbridge
from gpu_frameworks import MADE_UP_ADDRESSES, need_torch
from testing_hooks import hooks

THREADS = 8
WAIT = 120  # seconds a barrier waits before it breaks: a lost thread fails the test instead of hanging it


def run_together(fn, n=THREADS):
    """fn(i) for i in range(n), on n threads released at once; the results in order (an exception re-raised)."""
    start = threading.Barrier(n, timeout=WAIT)

    def body(i):
        start.wait()
        return fn(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(body, range(n)))


def variant(tag, v):
    return (f"// {tag}\n"
            f'extern "C" __global__ void scale_{v}(float* x, int n) {{\n'
            f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  if (i < n) x[i] = x[i] * {v + 2}.0f + {v}.0f;\n}}\n")


def summary(p):
    """What must not depend on threads: the binary, and each kernel's names and signature."""
    return p.arch, p.cubin, tuple((k.name, k.lowered_name, str(k.signature)) for k in p.kernels)


# ---- compiling --------------------------------------------------------------------------------------------------

def test_eight_threads_compile_same_and_different_sources():
    tag = uuid.uuid4()
    sources = [variant(tag, v) for v in range(4)]  # thread i compiles sources[i % 4]: each by two threads
    serial = [summary(jitbridge.compile(s, arch="sm_90")) for s in sources]
    assert all(s[1][:4] == b"\x7fELF" for s in serial)
    jitbridge.cache_clear()  # the threads miss again and store concurrently

    first = run_together(lambda i: jitbridge.compile(sources[i % 4], arch="sm_90"))
    assert [summary(p) for p in first] == [serial[i % 4] for i in range(THREADS)]
    assert {p.kernels[0].name for p in first} == {f"scale_{v}" for v in range(4)}
    assert any(p.origin == "compiled" for p in first)

    again = run_together(lambda i: jitbridge.compile(sources[i % 4], arch="sm_90"))
    assert [summary(p) for p in again] == [serial[i % 4] for i in range(THREADS)]
    assert [p.origin for p in again] == ["memory"] * THREADS


def test_compiles_race_cache_clear_and_info():
    source = variant(uuid.uuid4(), 5)
    expected = summary(jitbridge.compile(source, arch="sm_90"))
    rounds = 3

    def body(i):
        seen = []
        for _ in range(rounds):
            if i == 0:  # the writer: empties the cache (memory and disk) under the others' feet
                jitbridge.cache_clear()
                assert jitbridge.cache_info()["disk"] is True
            seen.append(summary(jitbridge.compile(source, arch="sm_90")))
        return seen

    assert run_together(body) == [[expected] * rounds] * THREADS
    assert summary(jitbridge.compile(source, arch="sm_90")) == expected


# ---- packing ----------------------------------------------------------------------------------------------------

PACK_SRC = r'''
#include <cuda_fp16.h>
struct Params { double scale; int n; };
extern "C" __global__ void k(const float* a, float* b, int n, unsigned char u, bool flag, float f, double d,
                             __half h, Params p, void* raw, long long big) {}
'''
ADDR = 0x7F0000001000


class MeetingInt:
    """An integer argument (through __index__ only) whose first conversion waits at `barrier` for the other
    threads' conversions: every pack is then in the middle of its arguments at once."""

    def __init__(self, value, barrier):
        self.value, self.barrier, self.met = value, barrier, False

    def __index__(self):
        if not self.met:
            self.met = True
            self.barrier.wait()
        return self.value


def pack_args(t, n=None):
    """Thread t's arguments: values of its own in every scalar, views of made-up device addresses."""
    return (jitbridge.from_ptr(ADDR, (16,), "float32", device="cuda:0"),
            jitbridge.from_ptr(ADDR + 4096 * t, (16,), "float32", device="cuda:0"),
            1000 + t if n is None else n, 200 + t, bool(t % 2), 0.5 * t, -0.25 * t, 2.0 + t,
            struct.pack("<di4x", 3.0, t), jitbridge.from_ptr(ADDR, (16,), "int8", device="cuda:0"), (1 << 40) + t)


@MADE_UP_ADDRESSES
def test_eight_threads_pack_on_one_kernel_at_once():
    k = jitbridge.RawKernel(PACK_SRC, "k", arch="sm_90")
    pack = hooks.pack_args  # imported here, before the threads (a test without jitbridge_testing skips here)
    serial = [pack(k, *pack_args(t)) for t in range(THREADS)]
    assert struct.unpack("<i", serial[3][2])[0] == 1003
    assert struct.unpack("<Q", serial[3][1])[0] == ADDR + 4096 * 3
    meet = threading.Barrier(THREADS, timeout=WAIT)

    def body(t):
        out = []
        for _ in range(50):
            out.append(pack(k, *pack_args(t)))
        meeting = MeetingInt(1000 + t, meet)
        out.append(pack(k, *pack_args(t, n=meeting)))  # all 8 half-way through together
        assert meeting.met
        with pytest.raises(OverflowError, match="does not fit in 'int'"):
            pack(k, *pack_args(t, n=2 ** 40))
        return out

    for t, packs in enumerate(run_together(body)):
        assert packs == [serial[t]] * 51, t


@MADE_UP_ADDRESSES
def test_eight_threads_each_build_and_pack_their_own_kernel():
    tag = uuid.uuid4()
    pack = hooks.pack_args  # imported here, before the threads

    def body(t):
        k = jitbridge.RawKernel(variant(tag, t), f"scale_{t}", arch="sm_90")
        return str(k.signature), pack(k, jitbridge.from_ptr(ADDR, (4,), "float32", device="cuda:0"), t)

    results = run_together(body)
    assert results == [("(float*, int)", [struct.pack("<Q", ADDR), struct.pack("<i", t)]) for t in range(THREADS)]


# ---- launching (GPU) --------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_eight_threads_compile_and_launch_at_once(gpu):
    torch = need_torch()
    tag = uuid.uuid4()
    shared = jitbridge.RawKernel(variant(tag, 30), "scale_30")
    n = 1 << 16

    def body(t):
        own = jitbridge.RawKernel(variant(tag, t % 4), f"scale_{t % 4}")
        a = torch.full((n,), float(t), device="cuda")
        b = torch.full((n,), float(t), device="cuda")
        own((n + 255) // 256, 256, (a, n))
        shared[(n + 255) // 256, 256](b, n)
        torch.cuda.current_stream().synchronize()
        return a.cpu(), b.cpu()

    for t, (a, b) in enumerate(run_together(body)):
        v = t % 4
        assert torch.all(a == t * (v + 2) + v), t
        assert torch.all(b == t * 32 + 30), t
