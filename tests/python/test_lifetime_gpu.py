"""Lifetimes on the GPU: inputs, outputs, views and kernels dropped (and garbage-collected) while the kernels that
use them are still queued behind a slow one, results checked afterwards; a kernel fault, and the recovery that
docs/DESIGN.md documents (a new process; the faulted one fails cleanly and exits).

Each test queues a spinning kernel (~0.2 s) first, drops what it can, runs `gc.collect()`, allocates and poisons
fresh memory on the same stream (which a premature free would hand back), checks that the slow kernel is still
running (otherwise the test proves nothing), and only then synchronizes and compares with a reference."""
import gc
import subprocess
import sys
import uuid

import pytest

import jitbridge
from gpu_frameworks import SPIN_COPY, SPIN_CYCLES, need_cupy, need_torch

pytestmark = pytest.mark.gpu

N = 1 << 20
COPY = r'''
extern "C" __global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}'''
GRID, BLOCK = (N + 255) // 256, 256


def warmed_up(kernel, *args):
    """Launches `kernel` once and waits: loading a module into the GPU's context at a kernel's first launch
    waits for the work already queued, which would end the spinning kernel before the test looks."""
    t = jitbridge.empty(1, "float32")
    kernel(1, 1, (t, t) + args)
    jitbridge.synchronize()
    return kernel


@pytest.fixture(autouse=True)
def nothing_left_to_collect():
    """Collects what earlier tests left in reference cycles before a test starts: unloading a module (a
    RawKernel collected late) waits for the GPU, which would end the spinning kernel before the test looks."""
    gc.collect()
    jitbridge.synchronize()


@pytest.fixture(scope="module")
def spin():
    return warmed_up(jitbridge.RawKernel(SPIN_COPY, "spin_copy"), 0, 1)


@pytest.fixture(scope="module")
def copy():
    return warmed_up(jitbridge.RawKernel(COPY, "copy"), 1)


def test_torch_input_dropped_while_queued(gpu, spin):
    torch = need_torch()
    s = torch.cuda.Stream()
    src = torch.randn(N, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        x = src.clone()                        # allocated on s
        out = torch.full_like(src, float("nan"))
        spin[GRID, BLOCK](out, x, SPIN_CYCLES, N)  # on s (torch's current stream); reads x after ~0.2 s
        del x
        gc.collect()                           # x's block goes back to torch's pool for s
        y = torch.empty_like(src)              # may be x's block: ordered after the spin on s
        y.fill_(-7.0)
        assert not s.query(), "the spinning kernel finished too early for the test to mean anything"
    s.synchronize()
    torch.testing.assert_close(out, src, rtol=0, atol=0)
    assert bool((y == -7.0).all())


def test_jitbridge_tensors_dropped_while_queued_on_another_stream(gpu, spin, copy):
    torch = need_torch()
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    src = torch.randn(N, device="cuda")
    torch.cuda.synchronize()
    t_in = jitbridge.empty(N, "float32", stream=a.cuda_stream)
    t_out = jitbridge.empty(N, "float32", stream=a.cuda_stream)
    with torch.cuda.stream(a):
        torch.from_dlpack(t_in).copy_(src)
        torch.from_dlpack(t_out).fill_(float("nan"))
    r = torch.full_like(src, float("nan"))
    spin(GRID, BLOCK, (t_out, t_in, SPIN_CYCLES, N), stream=b)  # both tensors handed to b
    copy(GRID, BLOCK, (t_out, r, N), stream=b)
    old = {t_in.ptr, t_out.ptr}
    del t_in, t_out
    gc.collect()  # freed on a, after a waits for b: nothing may reuse them before b's kernels end
    fresh = [jitbridge.empty(N, "float32", stream=a.cuda_stream) for _ in range(2)]
    with torch.cuda.stream(a):
        for t in fresh:
            torch.from_dlpack(t).fill_(-7.0)
    assert not b.query(), "the spinning kernel finished too early for the test to mean anything"
    torch.cuda.synchronize()
    torch.testing.assert_close(r, src, rtol=0, atol=0)
    for t in fresh:  # a late write by b's kernels into reused memory would show here
        assert bool((torch.from_dlpack(t) == -7.0).all())
    if not old & {t.ptr for t in fresh}:
        pytest.skip("the pool did not hand the freed blocks back; ordering held but was not stressed")


def test_kernel_and_module_dropped_while_queued(gpu):
    torch = need_torch()
    # A source no other test compiles (a fresh module, not one the in-memory cache shares).
    tag = uuid.uuid4().hex
    src_code = SPIN_COPY.replace("spin_copy", f"spin_copy_{tag}")
    k = warmed_up(jitbridge.RawKernel(src_code, f"spin_copy_{tag}"), 0, 1)
    m = jitbridge.RawModule(code=src_code)
    k2 = warmed_up(m.get_function(f"spin_copy_{tag}"), 0, 1)
    s = torch.cuda.Stream()
    src = torch.randn(N, device="cuda")
    out1 = torch.full_like(src, float("nan"))
    out2 = torch.full_like(src, float("nan"))
    torch.cuda.synchronize()
    k(GRID, BLOCK, (out1, src, SPIN_CYCLES, N), stream=s)
    k2(GRID, BLOCK, (out2, src, SPIN_CYCLES, N), stream=s)
    assert not s.query(), "the spinning kernel finished too early for the test to mean anything"
    del k, k2, m
    gc.collect()  # the modules may be unloaded now (the driver may wait for them): queued launches must still run
    s.synchronize()
    torch.testing.assert_close(out1, src, rtol=0, atol=0)
    torch.testing.assert_close(out2, src, rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["as_array", "dlpack_capsule"])
def test_view_keeps_its_producer_alive(gpu, copy, kind):
    torch = need_torch()
    src = torch.randn(N, device="cuda")
    x = src.clone()
    if kind == "as_array":
        view = jitbridge.as_array(x)
    else:  # a producer handing over a capsule it made earlier: the view must own the DLPack tensor
        class CapsuleHolder:
            def __init__(self, cap, device):
                self.cap, self.device = cap, device

            def __dlpack__(self, stream=None, max_version=None, **kwargs):
                return self.cap

            def __dlpack_device__(self):
                return self.device

        holder = CapsuleHolder(x.__dlpack__(), x.__dlpack_device__())
        view = jitbridge.as_array(holder)
        del holder
    del x
    gc.collect()
    junk = torch.full_like(src, -7.0)  # would take x's block if the view had let it go
    out = torch.full_like(src, float("nan"))
    copy(GRID, BLOCK, (view, out, N))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, src, rtol=0, atol=0)
    assert bool((junk == -7.0).all())


def test_cupy_input_dropped_while_queued(gpu, spin):
    cp = need_cupy()
    src = cp.random.standard_normal(N, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = src.copy()
        out = cp.full(N, cp.nan, dtype=cp.float32)
        spin((GRID,), (BLOCK,), (out, x, 5 * SPIN_CYCLES, N))  # CuPy's current stream: s; ~1 s (CuPy's first
        # calls below take longer than 0.2 s)
        del x
        gc.collect()
        # Checked here, not after CuPy's allocation and fill below: on a fresh machine those can wait for the
        # GPU themselves (seen on an H100 with a 1 s spin), which is CuPy's behaviour, not the drop under test.
        assert not s.done, "the spinning kernel finished too early for the test to mean anything"
        y = cp.empty(N, dtype=cp.float32)  # CuPy's pool is per stream: ordered after the spin
        y.fill(-7.0)
    s.synchronize()
    assert bool(cp.array_equal(out, src))
    assert bool((y == -7.0).all())


FAULT_CHILD = r'''
import gc, sys, jitbridge, torch
bad = jitbridge.RawKernel('extern "C" __global__ void wild_write(int* p) { p[1ll << 40] = 1; }', "wild_write")
ok = jitbridge.RawKernel('extern "C" __global__ void fine(int* p) { p[0] = 1; }', "fine")
x = torch.zeros(4, dtype=torch.int32, device="cuda")
t = jitbridge.empty(4, "int32")
bad(1, 1, (x,))
for what, call in [("SYNC", jitbridge.synchronize), ("LAUNCH", lambda: ok(1, 1, (x,))),
                   ("EMPTY", lambda: jitbridge.empty(4, "int32")), ("FREE", lambda: (gc.collect(), None))]:
    try:
        call()
        print(what, "no error")
    except (jitbridge.LaunchError, jitbridge.DriverError) as e:
        print(what, type(e).__name__, e)
    sys.stdout.flush()
del t  # its stream-ordered free fails in a poisoned context: the deleter must not throw or abort
gc.collect()
print("EXIT", flush=True)
'''


def test_kernel_fault_then_documented_recovery(gpu, copy):
    """docs/DESIGN.md (Faults): a fault poisons the process's context; every later call fails with a LaunchError or
    DriverError (never a crash or hang), the process exits cleanly, and a new process works. This process, which
    did not fault, keeps working throughout."""
    torch = need_torch()
    out = subprocess.run([sys.executable, "-c", FAULT_CHILD], capture_output=True, text=True, timeout=120)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["SYNC"].startswith("LaunchError") and "wild_write" in lines["SYNC"], log
    assert "restart the process" in lines["SYNC"], log
    assert lines["LAUNCH"].startswith(("LaunchError", "DriverError")), log
    assert lines["EMPTY"].startswith(("LaunchError", "DriverError")), log
    assert "EXIT" in out.stdout, log
    # The recovery: another process (here, this one) runs kernels as before.
    src = torch.randn(N, device="cuda")
    dst = torch.full_like(src, float("nan"))
    copy(GRID, BLOCK, (src, dst, N))
    torch.cuda.synchronize()
    torch.testing.assert_close(dst, src, rtol=0, atol=0)
    again = subprocess.run([sys.executable, "-c", "import jitbridge, torch\n"
                            "x = torch.zeros(4, device='cuda')\n"
                            "jitbridge.RawKernel('extern \"C\" __global__ void one(float* p) { p[threadIdx.x] = 1; }',"
                            " 'one')(1, 4, (x,))\nprint('SUM', float(x.sum()))"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "SUM 4.0" in again.stdout, again.stdout + again.stderr
