"""bench_link.py — separate compilation: jitbridge.link (relocatable and LTO), a link's cache hit, and compile() of a
-dc dynamic-parallelism kernel (linked inside), beside cuda.core's Linker and CuPy's RawKernel(options=("-dc",)) when
they are importable (n/a otherwise). Prints a table; every link or compile timed is of inputs no cache has seen."""
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import fmt_us, median_us, print_table, use_jitbridge  # noqa: E402

CALLER = r"""
extern __device__ float scale_of(float x, int k);
__global__ void apply(const float* in, float* out, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = scale_of(in[i], k);
}
"""
CALLEE = "__device__ float scale_of(float x, int k) {{ return x * (float)k + {c}.0f; }}\n"
PARENT = r"""
extern "C" __global__ void child(int* out, int base) {{ out[threadIdx.x] = base + {c} * (int)threadIdx.x; }}
extern "C" __global__ void parent(int* out, int base) {{ if (threadIdx.x == 0) child<<<1, 32>>>(out, base); }}
"""
REPEAT = 9
_fresh = itertools.count(int(time.time()) % 100000 * 1000)  # constants no earlier run used


def jitbridge_rows(jb, arch):
    rows = {}
    for flag, label in (("-dc", "link (2 relocatable programs)"), ("-dlto", "LTO link (2 LTO-IR programs)")):
        caller = jb.compile(CALLER, options=[flag], arch=arch)
        callees = [jb.compile(CALLEE.format(c=next(_fresh)), options=[flag], arch=arch) for _ in range(REPEAT)]
        it = iter(callees)
        rows[label] = median_us(lambda: jb.link(caller, next(it)), repeat=REPEAT)
        if flag == "-dc":
            jb.link(caller, callees[0])
            rows["link, cache hit"] = median_us(lambda: jb.link(caller, callees[0]), repeat=REPEAT * 5)
    rows["compile -dc with device launch (linked inside)"] = median_us(
        lambda: jb.compile(PARENT.format(c=next(_fresh)), options=["-dc"], arch=arch), repeat=REPEAT)
    return rows


def cuda_core_rows(arch):
    try:
        from cuda.core import Linker, LinkerOptions, Program, ProgramOptions
    except ImportError:
        return {}
    rows = {}
    for lto, label in ((False, "link (2 relocatable programs)"), (True, "LTO link (2 LTO-IR programs)")):
        target = "ltoir" if lto else "cubin"
        opts = ProgramOptions(arch=arch, relocatable_device_code=True, link_time_optimization=lto)
        caller = Program(CALLER, "c++", opts).compile(target)
        callees = [Program(CALLEE.format(c=next(_fresh)), "c++", opts).compile(target) for _ in range(REPEAT)]
        it = iter(callees)
        link_options = LinkerOptions(arch=arch, link_time_optimization=lto)

        def one():
            objects = (caller, next(it))
            try:
                linker = Linker(*objects, options=link_options)
            except TypeError:  # releases whose signature is Linker(options, *object_codes)
                linker = Linker(link_options, *objects)
            linker.link("cubin")
        rows[label] = median_us(one, repeat=REPEAT)
    return rows


def cupy_rows():
    try:
        import cupy
    except ImportError:
        return {}
    try:
        cupy.cuda.Device(0).use()
    except Exception:  # noqa: BLE001 - no GPU: CuPy cannot compile for one
        return {}

    def one():
        k = cupy.RawKernel(PARENT.format(c=next(_fresh)), "parent", options=("-dc",))
        k.attributes  # forces compile, link and load
    return {"compile -dc with device launch (linked inside)": median_us(one, repeat=REPEAT)}


def main():
    print(use_jitbridge())
    import jitbridge as jb

    arch = jb.default_arch()
    ours = jitbridge_rows(jb, arch)
    core, cp = {}, {}
    for name, fn in (("cuda.core", lambda: cuda_core_rows(arch)), ("CuPy", cupy_rows)):
        try:
            (core if name == "cuda.core" else cp).update(fn())
        except Exception as e:  # noqa: BLE001 - a peer that fails is reported, the table still prints
            print(f"{name}: n/a ({type(e).__name__}: {e})")
    rows = [(label, fmt_us(us), fmt_us(core.get(label)), fmt_us(cp.get(label))) for label, us in ours.items()]
    nvjitlink = jb._core._cuda_search()["nvjitlink"]
    print_table(f"Linking ({arch}; medians of {REPEAT}; nvJitLink {nvjitlink['version']} at {nvjitlink['path']})",
                ["step", "jitbridge", "cuda.core Linker", "CuPy RawKernel(-dc)"], rows, key="link")


if __name__ == "__main__":
    main()
