"""bench_compile.py — the compile path: cold compile vs NVRTC direct, heavy-header kernels (cub, cuda_bf16.h) with
and without automatic precompiled headers, cache hits in one process and in fresh processes, side by side with CuPy
and cuda.core where they are installed. Prints two tables."""
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import child_env, cpp_bench, fmt_us, median_us, print_table, run_child, use_jitbridge  # noqa: E402

KERNEL = r'''
extern "C" __global__ void k(const float* a, const float* b, float* c, float* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { c[i] = a[i] + b[i]; d[i] = a[i] * b[i]; }
}
'''

# Each child times one step, from the call to having a kernel handle / signatures in hand.
JITBRIDGE_CHILD = '''
import time, jitbridge
src = {src!r}
t0 = time.perf_counter()
p = jitbridge.compile(src{arch})
assert p.origin == "disk", p.origin
assert p.kernels[0].signature is not None
print((time.perf_counter() - t0) * 1e6)
'''
CUPY_CHILD = '''
import time, cupy
src = {src!r}
cupy.cuda.Device(0).use()
t0 = time.perf_counter()
f = cupy.RawModule(code=src).get_function("k")
f.attributes  # forces the module to load
print((time.perf_counter() - t0) * 1e6)
'''
CUDA_CORE_CHILD = '''
import time
from cuda.core import Device, Program, ProgramOptions
dev = Device(0); dev.set_current()
src = {src!r}
arch = "sm_" + "".join(map(str, dev.compute_capability))
t0 = time.perf_counter()
k = Program(src, "c++", ProgramOptions(arch=arch)).compile("cubin").get_kernel("k")
print((time.perf_counter() - t0) * 1e6)
'''


# Without the C++ bench (an installed package): cold compiles timed from Python in a child with the disk cache
# off, alternating NVRTC called directly through ctypes (the same libnvrtc jitbridge loaded) and jitbridge.compile,
# each on a source no cache has seen. Prints "cold_nvrtc_direct_us X" and "cold_jitbridge_us Y".
PYTHON_COLD_CHILD = '''
import ctypes, statistics, time, jitbridge
src = {src!r}
jitbridge.compile(src, arch="sm_90")  # loads NVRTC and warms jitbridge up
lib = ctypes.CDLL(jitbridge._core._cuda_search()["nvrtc"]["path"])  # the NVRTC jitbridge picked
def nvrtc_direct(code):
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), b"k.cu", 0, None, None) == 0
    opts = (ctypes.c_char_p * 1)(b"-arch=sm_90")
    assert lib.nvrtcCompileProgram(prog, 1, opts) == 0
    size = ctypes.c_size_t()
    assert lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)) == 0
    buf = ctypes.create_string_buffer(size.value)
    assert lib.nvrtcGetCUBIN(prog, buf) == 0
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
direct, ours = [], []
for i in range(9):
    t0 = time.perf_counter(); nvrtc_direct(src + "// direct %d %f" % (i, t0)); direct.append(time.perf_counter() - t0)
    t0 = time.perf_counter(); p = jitbridge.compile(src + "// ours %d %f" % (i, t0), arch="sm_90")
    assert p.origin == "compiled" and p.kernels[0].signature is not None
    ours.append(time.perf_counter() - t0)
print("cold_nvrtc_direct_us", statistics.median(direct) * 1e6)
print("cold_jitbridge_us", statistics.median(ours) * 1e6)
'''


# Heavy-header kernels, as compile_bench.cpp's heavy_source() writes them (kept in step by hand: the C++ rows and the
# peers' rows must compile the same text).
def heavy_source(family, variant):
    if family == "cub":
        return ("#include <cub/block/block_reduce.cuh>\n"
                'extern "C" __global__ void k(const float* x, float* out) {\n'
                "  using R = cub::BlockReduce<float, 128>;\n  __shared__ typename R::TempStorage t;\n"
                f"  float v = R(t).Sum(x[blockIdx.x * 128 + threadIdx.x] * {variant}.0f);\n"
                "  if (threadIdx.x == 0) out[blockIdx.x] = v;\n}\n")
    return ("#include <cuda_bf16.h>\n"
            'extern "C" __global__ void k(__nv_bfloat16* y, const __nv_bfloat16* x, int n) {\n'
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  if (i < n) y[i] = __float2bfloat16(__bfloat162float(x[i]) * {variant}.0f + 1.0f);\n}}\n")


# Peers on the heavy kernels: five distinct kernels in one fresh process, each timed from source to a compiled
# binary (their own caches pointed at an empty directory). Prints the five times (us).
CUPY_HEAVY_CHILD = '''
import time, cupy
cupy.cuda.Device(0).use()
out = []
for src in {srcs!r}:
    t0 = time.perf_counter()
    cupy.RawKernel(src, "k").compile()
    out.append((time.perf_counter() - t0) * 1e6)
print(" ".join("%.1f" % t for t in out))
'''
CUDA_CORE_HEAVY_CHILD = '''
import time
from cuda.core import Device, Program, ProgramOptions
dev = Device(0); dev.set_current()
arch = "sm_" + "".join(map(str, dev.compute_capability))
out = []
for src in {srcs!r}:
    t0 = time.perf_counter()
    Program(src, "c++", ProgramOptions(arch=arch, include_path={inc!r})).compile("cubin")
    out.append((time.perf_counter() - t0) * 1e6)
print(" ".join("%.1f" % t for t in out))
'''


def heavy_peer(code, family, env_name):
    """The five kernel times of a peer (list), or 'n/a (why)'."""
    import jitbridge
    srcs = [heavy_source(family, i) for i in range(1, 6)]
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", code.format(srcs=srcs, inc=list(jitbridge.toolkit_include_dirs()))],
                             env=child_env(**{env_name: d}), capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return f"n/a ({(lines[-1] if lines else 'failed')[:50]})"
    return [float(v) for v in out.stdout.split()]


def heavy_table(c):
    """Rows of the heavy-header table from the C++ bench's heavy_* numbers, with CuPy and cuda.core beside them."""
    rows = []
    for family, label in (("cub", "cub BlockReduce (cub/block/block_reduce.cuh)"), ("bf16", "cuda_bf16.h")):
        cupy = heavy_peer(CUPY_HEAVY_CHILD, family, "CUPY_CACHE_DIR")
        core = heavy_peer(CUDA_CORE_HEAVY_CHILD, family, "CUDA_CORE_CACHE_DIR")
        for i in range(1, 6):
            direct = c[f"heavy_{family}_direct_{i}"]
            nopch, pch = c[f"heavy_{family}_nopch_{i}"], c[f"heavy_{family}_pch_{i}"]
            ratio = pch / direct
            goal = ("<= 1.1x " + ("ok" if ratio <= 1.1 else "MISSED")) if i == 1 else \
                   ("<= 0.3x " + ("ok" if ratio <= 0.3 else "MISSED"))
            peers = [fmt_us(p[i - 1]) + f" ({p[i - 1] / direct:.2f}x)" if isinstance(p, list) else (p if i == 1 else "")
                     for p in (cupy, core)]
            rows.append([f"{label}, kernel {i}" if i == 1 else f"  kernel {i}", fmt_us(direct),
                         f"{fmt_us(nopch)} ({nopch / direct:.2f}x)", f"{fmt_us(pch)} ({ratio:.2f}x)", *peers, goal])
        rows.append(["  (compiles that used a PCH, of 5)", "", f"{c[f'heavy_{family}_nopch_pch_uses']:.0f}",
                     f"{c[f'heavy_{family}_pch_pch_uses']:.0f}", "", "", ""])
    return rows


def cpp_numbers():
    """The C++ compile benchmark's numbers, or None when it is not built (an installed package)."""
    exe = cpp_bench("jitbridge_compile_bench")
    if exe is None:
        return None
    out = subprocess.run([exe, "15"], capture_output=True, text=True, check=True, timeout=1800).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines() if line.strip())}


def python_cold_numbers():
    out = subprocess.run([sys.executable, "-c", PYTHON_COLD_CHILD.format(src=KERNEL)],
                         env=child_env(JITBRIDGE_CACHE="0"), capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"cold-compile child failed: {out.stderr.strip()[-500:]}")
    return {k: float(v) for k, v in (line.split() for line in out.stdout.splitlines() if line.strip())}


def peer(code, cache_dir, env_name):
    # Two runs: the first fills the peer's own cache (if it has one), the second is measured.
    try:
        run_child(code.format(src=KERNEL), **{env_name: cache_dir})
        return statistics.median(run_child(code.format(src=KERNEL), **{env_name: cache_dir}) for _ in range(5))
    except Exception as e:  # a peer that is missing or fails is reported, not fatal
        return f"n/a ({str(e)[:60]})"


def main():
    print(f"bench_compile: measuring {use_jitbridge()}")
    c = cpp_numbers()
    import jitbridge
    rows = []
    if c is None:  # an installed package: the cold rows from Python, the C++-only rows n/a
        c, lang = python_cold_numbers(), "Python"
        print("(the C++ rows are n/a: the C++ benches are not built; bash scripts/setup builds them)")
    else:
        lang = "C++"
    ratio = c["cold_jitbridge_us"] / c["cold_nvrtc_direct_us"]
    rows.append([f"cold compile, NVRTC called directly ({lang})", fmt_us(c["cold_nvrtc_direct_us"]), "", ""])
    rows.append([f"cold compile, jitbridge ({lang}, signatures+resources)", fmt_us(c["cold_jitbridge_us"]),
                 f"{ratio:.3f}x direct", "<= 1.1x " + ("ok" if ratio <= 1.1 else "MISSED")])
    if "disk_hit_fresh_process_us" in c:
        hit = c["disk_hit_fresh_process_us"]
        rows.append(["disk hit, fresh process, C++ (arch given)", fmt_us(hit), "",
                     "< 1 ms " + ("ok" if hit < 1000 else "MISSED")])
        rows.append(["disk hit, fresh process, C++ (default arch: driver init)",
                     fmt_us(c["disk_hit_fresh_process_default_arch_us"]), "", ""])
        rows.append(["disk hit, fresh process, C++, cub kernel (610 headers, arch given)",
                     fmt_us(c["disk_hit_fresh_process_cub_us"]), "", ""])
    with tempfile.TemporaryDirectory() as cache_dir:
        env = child_env(JITBRIDGE_CACHE_DIR=cache_dir)
        subprocess.run([sys.executable, "-c", f"import jitbridge; jitbridge.compile({KERNEL!r}, arch='sm_90'); "
                        f"jitbridge.compile({KERNEL!r})"], env=env, check=True)
        py_hit = statistics.median(run_child(JITBRIDGE_CHILD.format(src=KERNEL, arch=", arch='sm_90'"),
                               JITBRIDGE_CACHE_DIR=cache_dir) for _ in range(7))
        py_hit_default = statistics.median(run_child(JITBRIDGE_CHILD.format(src=KERNEL, arch=""),
                                       JITBRIDGE_CACHE_DIR=cache_dir) for _ in range(5))
    rows.append(["disk hit, fresh process, Python (arch given)", fmt_us(py_hit), "",
                 "< 1 ms " + ("ok" if py_hit < 1000 else "MISSED")])
    rows.append(["disk hit, fresh process, Python (default arch)", fmt_us(py_hit_default), "", ""])
    with tempfile.TemporaryDirectory() as d:
        cupy_us = peer(CUPY_CHILD, d, "CUPY_CACHE_DIR")
    with tempfile.TemporaryDirectory() as d:
        core_us = peer(CUDA_CORE_CHILD, d, "CUDA_CORE_CACHE_DIR")
    for name, v in (("CuPy RawModule, fresh process, its disk cache warm", cupy_us),
                    ("cuda.core Program.compile + get_kernel, fresh process", core_us)):
        if isinstance(v, float):
            rows.append([name, fmt_us(v), f"{v / py_hit:.1f}x jitbridge (Python)", ""])
        else:
            rows.append([name, v, "", ""])
    if "memory_hit_us" in c:
        mem = c["memory_hit_us"]
        rows.append(["same compile again in one process, C++", fmt_us(mem), "",
                     "< 5 us " + ("ok" if mem < 5 else "MISSED")])
    src, o = KERNEL, jitbridge.compile(KERNEL, arch="sm_90")
    py_mem = median_us(lambda: jitbridge.compile(src, arch="sm_90"), repeat=15, number=2000)
    assert jitbridge.compile(src, arch="sm_90").origin == "memory" and o is not None
    rows.append(["same compile again in one process, Python", fmt_us(py_mem), "",
                 "< 5 us " + ("ok" if py_mem < 5 else "MISSED")])
    print_table("Compile path (medians; fresh-process rows over 5-15 processes)",
                ["measurement", "time", "ratio", "goal"], rows, key="compile_path")
    if "heavy_cub_direct_1" in c:
        print_table("Heavy headers: five distinct kernels compiled one after the other in a fresh process (medians over "
                    "JITBRIDGE_BENCH_HEAVY_ROUNDS processes; ratios against NVRTC direct on the same kernel)",
                    ["kernel", "NVRTC direct", "jitbridge, PCH off", "jitbridge, automatic PCH", "CuPy RawKernel",
                     "cuda.core Program", "goal"], heavy_table(c), key="compile_heavy")
    else:
        print("(the heavy-header table is n/a: it needs the C++ bench)")


if __name__ == "__main__":
    main()
