"""lifetime_machine.py — the stream-lifetime state machine (issue 23): streams, arrays, views, DLPack capsules and
launches created, used, exported and dropped in a random order, with garbage collection at random points.

Backends:
  fake  the fake driver (tests/fuzz/fake_cuda; run with its libcuda.so.1 first on LD_LIBRARY_PATH): streams are
        __cuda_stream__ objects the fake driver destroys when they go, and raw ints of streams pinned for the run
        (the documented rule for ints); arrays are jitbridge Tensors, views (as_array, from_ptr) and capsules.
        Any driver call on a destroyed stream aborts the process; at the end every allocation must be freed and
        every stream destroyed.
  gpu   a real GPU with CuPy (and torch, when importable): CuPy streams (new, null, per-thread; entered with
        `with`), torch streams, __cuda_stream__ wrappers, raw ints of pinned streams; arrays from jitbridge, CuPy
        and torch; results of every launch are checked against a NumPy reference when read back.
Prints one summary line: `lifetime_machine: backend=... seed=... steps=... launches=... checks=... streams=...
 dropped_streams=... gc=... failures=0`; exits 1 on a wrong result (0 otherwise; a crash is the process dying).
Usage: python lifetime_machine.py [--backend fake|gpu] [--steps N] [--seed S]
"""
import argparse
import gc
import random
import sys

import numpy as np

import jitbridge as jb

N = 4096
KERNEL = r"""
extern "C" __global__ void affine(const float* x, float* y, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}"""


def fake_driver():
    """The fake driver jitbridge loaded (libcuda.so.1 of tests/fuzz/fake_cuda), through ctypes, typed."""
    import ctypes
    fake = ctypes.CDLL("libcuda.so.1")
    fake.fake_cuda_stream_create.restype = ctypes.c_size_t
    fake.fake_cuda_stream_destroy.argtypes = [ctypes.c_size_t]
    for name in ("fake_cuda_live_streams", "fake_cuda_live_allocations", "fake_cuda_stale_stream_uses"):
        getattr(fake, name).restype = ctypes.c_long
    return fake


class FakeStream:
    """A framework's stream on the fake driver: created with the object, destroyed when it goes (as CuPy's)."""

    def __init__(self):
        self.fake = fake_driver()
        self.handle = self.fake.fake_cuda_stream_create()

    def __cuda_stream__(self):
        return (0, self.handle)

    def __del__(self):
        self.fake.fake_cuda_stream_destroy(self.handle)


class Provider:
    """Any object with __cuda_stream__ (the protocol), wrapping another stream object it keeps."""

    def __init__(self, inner, handle):
        self.inner, self.handle = inner, handle

    def __cuda_stream__(self):
        return (0, self.handle)


class Entry:
    """An array the machine holds, and its reference values (shared by aliases; None: unknown or not checked)."""

    def __init__(self, obj, ref, kind):
        self.obj, self.ref, self.kind = obj, ref, kind


class Machine:
    def __init__(self, backend, seed):
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.backend = backend
        self.gpu = backend == "gpu"
        self.streams = []          # stream objects the machine may pass (and drop)
        self.pinned = []           # streams whose raw int handles are used: they live for the whole run
        self.arrays = []
        self.capsules = []
        self.stats = dict(steps=0, launches=0, checks=0, streams=0, dropped_streams=0, gc=0, failures=0)
        self.kernel = jb.RawKernel(KERNEL, "affine", **({} if self.gpu else {"arch": "sm_90"}))
        if self.gpu:
            import cupy
            self.cp = cupy
            try:
                import torch
                self.torch = torch if torch.cuda.is_available() else None
            except ImportError:
                self.torch = None
        else:
            self.fake = fake_driver()
        for _ in range(2):
            self.pinned.append(self.make_stream())

    # ---- streams --------------------------------------------------------------------------------------------
    def make_stream(self):
        self.stats["streams"] += 1
        if not self.gpu:
            s = FakeStream()
            return Provider(s, s.handle) if self.rng.random() < 0.3 else s
        r = self.rng.random()
        if self.torch is not None and r < 0.25:
            return self.torch.cuda.Stream()
        s = self.cp.cuda.Stream(non_blocking=self.rng.random() < 0.7)
        return Provider(s, s.ptr) if r > 0.85 else s

    def handle_of(self, s):
        if isinstance(s, Provider):
            return s.handle
        if hasattr(s, "cuda_stream"):
            return s.cuda_stream
        return getattr(s, "ptr", None) if self.gpu else s.handle

    def pick_stream(self):
        """A stream argument: None, 1, 2, a live stream object, or the int of a pinned stream."""
        r = self.rng.random()
        if r < 0.15:
            return None
        if r < 0.25:
            return self.rng.choice([1, 2])
        if r < 0.4:
            return self.handle_of(self.rng.choice(self.pinned))
        if not self.streams or self.rng.random() < 0.2:
            self.streams.append(self.make_stream())
        return self.rng.choice(self.streams)

    def drop_stream(self):
        if self.streams:
            self.streams.pop(self.rng.randrange(len(self.streams)))
            self.stats["dropped_streams"] += 1

    # ---- arrays -------------------------------------------------------------------------------------------------
    def new_array(self):
        ref = self.np_rng.standard_normal(N).astype(np.float32) if self.gpu else None
        kind = self.rng.choice(["jb", "jb", "cupy", "torch"] if self.gpu else ["jb"])
        if kind == "cupy":
            obj = self.cp.asarray(ref)
        elif kind == "torch" and self.torch is not None:
            obj = self.torch.from_numpy(ref.copy()).cuda()
        else:
            kind = "jb"
            s = self.pick_stream()
            cupy_with = self.gpu and isinstance(s, self.cp.cuda.Stream) and self.rng.random() < 0.5
            tensors = [e.obj for e in self.arrays if e.kind == "jb"]
            if cupy_with:          # CuPy's current stream as an int: jitbridge finds (and keeps) the Stream object
                with s:            # (empty_like(cupy_array) would give a CuPy array from CuPy's pool)
                    obj = jb.empty(N, "float32", stream=self.cp.cuda.get_current_stream().ptr)
            elif tensors and self.rng.random() < 0.25:   # another Tensor's stream, or stream=, with its owner
                obj = jb.empty_like(self.rng.choice(tensors), stream=s if self.rng.random() < 0.5 else None)
            else:
                obj = (jb.zeros if self.rng.random() < 0.5 else jb.empty)(N, "float32", stream=s)
            if self.gpu:           # fill with ref: a launch from a CuPy copy of it
                src = self.cp.asarray(ref)
                self.kernel((N + 255) // 256, 256, (src, obj, 1.0, 0.0, N), stream=s)
                self.stats["launches"] += 1
                jb.synchronize()   # CuPy does not know `s` reads src: it must not reuse it before the kernel ran
                del src
        self.arrays.append(Entry(obj, ref, kind))

    def new_view(self):
        if not self.arrays:
            return
        e = self.rng.choice(self.arrays)
        if e.kind == "capsule":
            return
        s = self.pick_stream()
        if self.rng.random() < 0.7 or not hasattr(e.obj, "ptr") or e.kind != "jb":
            v = jb.as_array(e.obj, stream=s)
        else:
            v = jb.from_ptr(e.obj.ptr, (N,), "float32", owner=e.obj, stream=s)
        self.arrays.append(Entry(v, e.ref, "view"))

    def export(self):
        tensors = [e for e in self.arrays if e.kind == "jb"]
        if not tensors:
            return
        e = self.rng.choice(tensors)
        r = self.rng.random()
        if self.gpu and r < 0.5:   # a real consumer: CuPy or torch pass their current stream as __dlpack__(stream=)
            if self.torch is not None and r < 0.2:
                obj, kind = self.torch.from_dlpack(e.obj), "torch"
            else:
                s = self.pick_stream()
                if isinstance(s, self.cp.cuda.Stream):
                    with s:
                        obj = self.cp.from_dlpack(e.obj)
                else:
                    obj = self.cp.from_dlpack(e.obj)
                kind = "cupy_alias"
            self.arrays.append(Entry(obj, e.ref, kind))
            return
        s = self.pick_stream()
        arg = -1 if s is None else (s if isinstance(s, int) else self.handle_of(s))
        if not isinstance(s, int) and s is not None:
            # A consumer hands over a bare int: the stream object must be kept by the consumer (here: pinned).
            self.pinned.append(s)
            self.streams.remove(s)
        self.capsules.append(e.obj.__dlpack__(stream=arg, max_version=(1, 0) if self.rng.random() < 0.5 else None))

    def launch(self):
        if not self.arrays:
            return
        x = self.rng.choice(self.arrays)
        outs = [e for e in self.arrays if e.kind == "jb"]
        if not outs:
            return
        y = self.rng.choice(outs)
        a, b = self.rng.choice([1.0, 2.0, -0.5]), self.rng.choice([0.0, 1.0, 3.0])
        s = self.pick_stream()
        if self.gpu and x.kind != "jb":
            # Only jitbridge Tensors are ordered by hand-offs; a framework array or a view was last written by
            # work jitbridge does not track: the machine waits (the lifetimes, not the races, are under test).
            jb.synchronize()
        self.kernel((N + 255) // 256, 256, (x.obj, y.obj, a, b, N), stream=s)
        self.stats["launches"] += 1
        if self.gpu:
            y.ref[:] = a * x.ref + b
            if x.kind != "jb":
                jb.synchronize()

    def check(self):
        if not self.gpu or not self.arrays:
            return
        e = self.rng.choice(self.arrays)
        jb.synchronize()
        if e.kind in ("jb", "view"):
            got = self.cp.from_dlpack(e.obj).get()
        elif e.kind in ("cupy", "cupy_alias"):
            self.cp.cuda.runtime.deviceSynchronize()
            got = e.obj.get()
        else:
            self.torch.cuda.synchronize()
            got = e.obj.cpu().numpy()
        self.stats["checks"] += 1
        if not np.allclose(got, e.ref, rtol=1e-5, atol=1e-5):
            self.stats["failures"] += 1
            print(f"lifetime_machine: wrong values in a {e.kind} at step {self.stats['steps']}", file=sys.stderr)

    def drop(self):
        r = self.rng.random()
        if self.capsules and r < 0.3:
            self.capsules.pop(self.rng.randrange(len(self.capsules)))
        elif self.arrays:
            self.arrays.pop(self.rng.randrange(len(self.arrays)))

    # ---- the driver -----------------------------------------------------------------------------------------------
    def step(self):
        ops = [(self.new_array, 12), (self.new_view, 8), (self.export, 8), (self.launch, 25), (self.check, 6),
               (self.drop, 22), (self.drop_stream, 10), (self.collect, 1)]
        op = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
        op()
        self.stats["steps"] += 1
        while len(self.arrays) > 64:
            self.drop()
        if len(self.pinned) > 64:   # pinned streams go only when nothing can hold their ints any more
            self.release_everything()

    def collect(self):
        gc.collect()
        self.stats["gc"] += 1

    def release_everything(self):
        self.arrays.clear()
        self.capsules.clear()
        gc.collect()
        jb.synchronize()
        del self.pinned[2:]
        self.streams.clear()
        gc.collect()

    def finish(self):
        self.release_everything()
        self.pinned.clear()
        gc.collect()
        jb.synchronize()
        if not self.gpu:
            allocations, streams = self.fake.fake_cuda_live_allocations(), self.fake.fake_cuda_live_streams()
            if allocations or streams:
                self.stats["failures"] += 1
                print(f"lifetime_machine: {allocations} allocations and {streams} streams left", file=sys.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["fake", "gpu"], default="fake")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    m = Machine(a.backend, a.seed)
    for _ in range(a.steps):
        m.step()
    m.finish()
    print("lifetime_machine: backend={} seed={} ".format(a.backend, a.seed)
          + " ".join(f"{k}={v}" for k, v in m.stats.items()))
    return 1 if m.stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
