"""usage.py — a small typed program against jitbridge's stubs: scripts/reference --check runs mypy --strict on it
(it is type-checked, never run). Each line uses a public name the way the docs show, with the types spelt out, so a
stub that loses or mistypes a name fails the check."""

import jitbridge
from jitbridge import CompileError, Program, RawKernel, RawModule

SOURCE = 'extern "C" __global__ void scale(float* x, float a, int n) { int i = threadIdx.x; if (i < n) x[i] *= a; }'


def compile_and_inspect() -> list[str]:
    program: Program = jitbridge.compile(SOURCE, options=["-DN=4"], arch="sm_90")
    kernel: jitbridge.Kernel = program.kernel("scale")
    lines = [program.arch, program.origin, kernel.name, kernel.lowered_name]
    registers: int = kernel.resources.registers
    lines.append(str(registers))
    signature = kernel.signature
    if signature is not None:
        lines.append(str(signature))
    return lines


def launch(n: int) -> None:
    kernel = RawKernel(SOURCE, "scale", arch="sm_90", check_args=True)
    x: jitbridge.Tensor = jitbridge.zeros((n,), "float32")
    kernel((n + 255) // 256, 256, (x, 2.0, n), stream=None, shared_mem=0)
    kernel[1, n](x, 2.0, n)
    jitbridge.synchronize()
    view: jitbridge.ArrayView = jitbridge.as_array(x)
    print(view.shape, view.dtype, kernel.num_regs)
    resources = kernel.resources
    if resources is not None and kernel.signature is not None:
        print(resources.registers + len(kernel.signature), kernel.attributes["num_regs"] + 1)
    blocks: int = kernel.max_active_blocks_per_sm(256)
    print(blocks)


def module_of(path: str) -> list[str]:
    module = RawModule(path=path)
    names: list[str] = module.kernel_names()
    first: RawKernel = module.get_function(names[0])
    print(repr(first), module.program is None)
    return names


def errors() -> str:
    try:
        jitbridge.compile("__global__ void k() { undefined_name; }")
    except CompileError as e:
        return f"{e.file}:{e.line}: {e.message}"
    return ""


info: dict[str, object] = jitbridge.cache_info()
version: tuple[int, int] = jitbridge.nvrtc_version()
