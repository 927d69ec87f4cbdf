"""demo.py — compiles the example kernels through the Python API and prints their signatures and
resources, shows what a compile error looks like, then runs the kernels when a GPU is present."""
import importlib.util
import os
import subprocess
import sys

import jitbridge

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "kernels")
NAME_EXPRESSIONS = {"block_sum.cu": ["block_sum<float, 256>", "block_sum<double, 128>"]}


def show(path):
    with open(path) as f:
        code = f.read()
    name = os.path.basename(path)
    prog = jitbridge.compile(code, name_expressions=NAME_EXPRESSIONS.get(name, ()), program_name=name)
    print(f"{name}: {len(prog.kernels)} kernel(s) for {prog.arch} ({prog.origin})")
    for k in prog.kernels:
        r = k.resources
        print(f"  {k.name}{k.signature}")
        print(f"      regs={r.registers} smem={r.shared_bytes} lmem={r.local_bytes} cmem={r.const_bytes} "
              f"spills={r.spill_store_bytes}/{r.spill_load_bytes}")


def main():
    major, minor = jitbridge.nvrtc_version()
    print(f"jitbridge {jitbridge.__version__}, NVRTC {major}.{minor}, target {jitbridge.default_arch()}\n")
    for name in sorted(os.listdir(KERNELS)):
        if name.endswith(".cu"):
            show(os.path.join(KERNELS, name))

    print("\nA compile error points at the line:")
    try:
        jitbridge.compile('extern "C" __global__ void oops(float* x) {\n  x[0] = sqrtf(x[0]) + y;\n}\n',
                          program_name="oops.cu")
    except jitbridge.CompileError as e:
        print("  " + "\n  ".join(str(e).splitlines()[:3]))

    info = jitbridge.driver_info()
    if not info["found"] or not info["devices"]:
        print(f"\nNot running the kernels: {info.get('reason') or 'the CUDA driver sees no GPU'}")
        return 0
    # On a GPU: the launch examples of the installed frameworks (each checks its results), and the C++ demo
    # (typed launch) when a CMake build tree has it.
    print(f"\nRunning kernels on {info['devices'][0]['name']}:")
    runs = [[sys.executable, os.path.join(HERE, "launch", f"{m}_saxpy.py")]
            for m in ("torch", "cupy", "numba") if importlib.util.find_spec(m) is not None]
    build = os.environ.get("JITBRIDGE_BUILD_DIR", os.path.join(os.path.dirname(HERE), "build"))
    if os.path.exists(os.path.join(build, "examples", "jitbridge_demo")):
        runs.append([os.path.join(build, "examples", "jitbridge_demo")])
    if not runs:
        print("  nothing to run them with: pip install torch (or cupy, numba) into this environment")
        return 0
    failed = [r[-1] for r in runs if subprocess.call(r) != 0]
    print(f"\n{len(runs) - len(failed)} of {len(runs)} runs passed" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
