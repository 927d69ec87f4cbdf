"""bench_launch_cpu.py — host time of jitbridge's Python launch path with no GPU: the fake driver of tests/fuzz/fake_cuda
(its cuLaunchKernel records the launch and returns), arrays of a synthetic DLPack exchange-API framework
(jitbridge_testing.exchange_api: one in C, as torch has, one calling Python), of __cuda_array_interface__, and stand-ins
of cupy.ndarray and numba's DeviceNDArray (their module, name and attributes; CuPy's as slots, C-level descriptors as
its Cython attributes are, Numba's in the instance dict as in Numba). What it shows is
jitbridge's own cost per launch (the fake driver's share is a few ns), to compare builds on one machine before and
after a change to the launch path; the GPU goals stay bench_launch.py's. Needs the build tree (bash scripts/setup):

    python3 bench/bench_launch_cpu.py [build]
    python3 bench/bench_launch_cpu.py build --count CASE N   # only N launches of the cases whose name holds CASE,
                                                             # after 100 each (bench_launch_instructions.py)
"""
import os
import statistics
import sys
import time
from pathlib import Path

ROUNDS, BATCH = 15, 20000


def fake_driver_env(build):
    """The environment of a child on the fake driver: it first on LD_LIBRARY_PATH, the build tree on PYTHONPATH."""
    fake = build / "tests" / "fake_cuda"
    if not (fake / "libcuda.so.1").is_file():
        sys.exit(f"bench_launch_cpu: no fake driver at {fake} (build the jitbridge_test_fake_cuda target)")
    env = dict(os.environ, BENCH_LAUNCH_CPU_CHILD="1",
               LD_LIBRARY_PATH=os.pathsep.join(p for p in (str(fake), os.environ.get("LD_LIBRARY_PATH")) if p),
               PYTHONPATH=os.pathsep.join([str(build / "python"), str(build / "python_testing")]))
    env.setdefault("JITBRIDGE_CACHE", "0")  # bench_launch_instructions.py gives a cache directory instead
    return env


def reexec_on_fake_driver(build, argv):
    """Runs this script again in fake_driver_env."""
    os.execve(sys.executable, [sys.executable, __file__, str(build), *argv], fake_driver_env(build))


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "build").resolve()
    count = sys.argv[2:5] if len(sys.argv) == 5 and sys.argv[2] == "--count" else None
    if os.environ.get("BENCH_LAUNCH_CPU_CHILD") != "1":
        reexec_on_fake_driver(build, sys.argv[2:])
    import jitbridge
    import jitbridge_testing as hooks

    class Exchange:   # a framework with the DLPack C exchange API (memory never touched: the driver is fake)
        def __init__(self, ptr, shape, dtype="float32", device=(2, 0), owner=None, strides=None):
            self._ptr, self._shape, self._dtype, self._device = ptr, tuple(shape), dtype, tuple(device)
            self._strides, self.owner = strides, owner

    Exchange.__dlpack_c_exchange_api__ = hooks.exchange_api(factory=Exchange)

    class Fixed:   # the exchange API in C: every object float32 (256, 256) at one address, no Python calls (as torch)
        pass

    Fixed.__dlpack_c_exchange_api__ = hooks.exchange_api(fixed=True, stream=0)

    class Cai:   # __cuda_array_interface__ only
        def __init__(self, ptr):
            self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (32,), "typestr": "<f4", "version": 3,
                                             "strides": None, "stream": None}

    import numpy as np

    class Memory:   # cupy.cuda.MemoryPointer's fields
        __slots__ = ("ptr", "device_id")

        def __init__(self, ptr):
            self.ptr, self.device_id = ptr, 0

    class CupyLike:   # cupy.ndarray: module "cupy", name "ndarray", read through its fields (Protocol::cupy_fields)
        __slots__ = ("data", "dtype", "shape", "strides", "__weakref__")

        def __init__(self, ptr):
            self.data, self.dtype, self.shape, self.strides = Memory(ptr), np.dtype("float32"), (32,), (4,)

        @property
        def __cuda_array_interface__(self):
            return {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str,
                    "data": (self.data.ptr, False), "version": 3}

    CupyLike.__module__, CupyLike.__qualname__ = "cupy", "ndarray"
    # CuPy's current stream is read through the C function CuPy exports (cupy_backends.cuda.stream's __pyx_capi__),
    # as with CuPy imported: a stand-in module holds one answering CuPy's null stream.
    import types
    for name in ("cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.stream"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["cupy_backends.cuda.stream"].__pyx_capi__ = {"get_stream_ptr": hooks.cupy_stream_capsule()}

    class Pointer:
        def __init__(self, value):
            self.value = value

    class NumbaLike:   # numba's DeviceNDArray (Protocol::numba_fields)
        def __init__(self, ptr):
            self.dtype, self.shape, self.strides = np.dtype("float32"), (32,), (4,)
            self.gpu_data, self.stream = Pointer(ptr), 0

        @property
        def device_ctypes_pointer(self):
            return self.gpu_data

        @property
        def __cuda_array_interface__(self):
            return {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str,
                    "data": (self.gpu_data.value, False), "version": 3, "stream": None}

    NumbaLike.__module__, NumbaLike.__qualname__ = "numba.cuda.cudadrv.devicearray", "DeviceNDArray"

    k = jitbridge.RawKernel(r"""
extern "C" __global__ void k(const float* a, const float* b, float* c, float* d, int n) {}""", "k", arch="sm_90")
    ex = [Exchange(0x7F0000010000 + 0x1000 * i, (32,)) for i in range(4)]
    cai = [Cai(0x7F0000020000 + 0x1000 * i) for i in range(4)]
    fx = [Fixed() for _ in range(4)]
    cp = [CupyLike(0x7F0000030000 + 0x1000 * i) for i in range(4)]
    nb = [NumbaLike(0x7F0000040000 + 0x1000 * i) for i in range(4)]
    kk = k[1, 32]
    cases = {
        "python loop harness (empty lambda)": lambda: None,
        "k((1,), (32,), (4 C exchange-API arrays, int))": lambda: k((1,), (32,), (fx[0], fx[1], fx[2], fx[3], 32)),
        "k[1, 32](4 C exchange-API arrays, int)": lambda: kk(fx[0], fx[1], fx[2], fx[3], 32),
        "k((1,), (32,), (4 Python exchange-API arrays, int))": lambda: k((1,), (32,), (ex[0], ex[1], ex[2], ex[3], 32)),
        "k[1, 32](4 Python exchange-API arrays, int)": lambda: kk(ex[0], ex[1], ex[2], ex[3], 32),
        "k((1,), (32,), (None x 4, int)) (the full path, no producer)":
            lambda: k((1,), (32,), (None, None, None, None, 32)),
        "k((1,), (32,), (4 CAI arrays, int))": lambda: k((1,), (32,), (cai[0], cai[1], cai[2], cai[3], 32)),
        "k((1,), (32,), (4 CuPy-like arrays, int))": lambda: k((1,), (32,), (cp[0], cp[1], cp[2], cp[3], 32)),
        "k((1,), (32,), (4 Numba-like arrays, int))": lambda: k((1,), (32,), (nb[0], nb[1], nb[2], nb[3], 32)),
        "k((1,), (32,), (4 C exchange-API arrays, int), check_args=False)":
            lambda: k((1,), (32,), (fx[0], fx[1], fx[2], fx[3], 32), check_args=False),
    }
    if count:
        chosen = [f for name, f in cases.items() if count[1] in name]
        if not chosen:
            sys.exit(f"bench_launch_cpu: no case holds {count[1]!r}")
        for f in chosen:
            for _ in range(100):
                f()
            for _ in range(int(count[2])):
                f()
        return 0
    samples = {name: [] for name in cases}
    for f in cases.values():
        for _ in range(100):
            f()
    for _ in range(ROUNDS):
        for name, f in cases.items():
            loop = range(BATCH)
            t0 = time.perf_counter()
            for _ in loop:
                f()
            samples[name].append((time.perf_counter() - t0) / BATCH * 1e9)
    best = {name: min(v) for name, v in samples.items()}
    med = {name: statistics.median(v) for name, v in samples.items()}
    harness = best["python loop harness (empty lambda)"]
    print(f"Host ns per launch on the fake driver (best / median of {ROUNDS} rounds of {BATCH}; net = best minus the "
          f"loop harness, {harness:.1f} ns)")
    for name in cases:
        if name.startswith("python loop"):
            continue
        print(f"  {name:<70} best {best[name]:7.1f}  median {med[name]:7.1f}  net {best[name] - harness:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
