"""demo.py — compiles the example kernels through the Python API and prints their signatures and
resources, shows what a compile error looks like, then runs the kernels when a GPU is present."""
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
    # The Python launcher arrives with the launch layer; until then the C++ demo runs the kernels.
    build = os.environ.get("JITBRIDGE_BUILD_DIR", os.path.join(os.path.dirname(HERE), "build"))
    runner = os.path.join(build, "examples", "jitbridge_demo")
    print(f"\nRunning the kernels on {info['devices'][0]['name']} ({runner}):")
    return subprocess.call([runner, KERNELS])


if __name__ == "__main__":
    sys.exit(main())
