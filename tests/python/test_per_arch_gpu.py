"""Modules per device architecture, on the one GPU kind at hand.

Two architectures cannot be had here (one H100, sm_90), so the per-architecture path is tested by forcing a second
target: jitbridge_testing.use_target binds a default-arch kernel on the GPU to the module its program's ModuleSet
builds from the compile request for sm_90a and for compute_90, as a GPU of that architecture would get. Three
modules are built, and each launch runs the one asked for (sm_90a's code sees __CUDA_ARCH_SPECIFIC__). An explicit
arch that cannot run on the GPU raises ValueError with CUDA's rule; one that can (PTX of an older target) runs.
"""

import numpy as np
import pytest

import jitbridge
from testing_hooks import hooks

pytestmark = pytest.mark.gpu

SOURCE = r"""
extern "C" __global__ void mark(int* out, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
  if (i == 0) {
#if defined(__CUDA_ARCH_SPECIFIC__)
    out[0] = __CUDA_ARCH_SPECIFIC__;
#else
    out[0] = 1;
#endif
    out[1] = __CUDA_ARCH__;
  }
}
"""


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _run(torch, k, n=5000):
    """Launches `k` on fresh inputs with a poisoned output; checks y; returns the marks the kernel wrote."""
    out = torch.full((2,), -7, dtype=torch.int32, device="cuda")
    x = torch.randn(n, device="cuda")
    y = torch.full_like(x, float("nan"))
    k((n + 255) // 256, 256, (out, x, y, n))
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 2.0 * x + 1.0)
    return out.tolist()


def test_forced_second_targets_build_one_module_each(gpu, torch):
    native = gpu["arch"]                        # "sm_90"
    number = int(native[3:])                    # 90
    specific, virtual = native + "a", "compute_" + native[3:]
    k = jitbridge.RawKernel(SOURCE, "mark")     # default arch: builds for each device's architecture
    assert _run(torch, k) == [1, number * 10]
    assert hooks.use_target(k) == (native, [native])
    assert hooks.use_target(k, specific) == (specific, [native, specific])
    assert _run(torch, k) == [number * 10, number * 10]  # the sm_XYa build ran
    assert hooks.use_target(k, virtual) == (virtual, [native, specific, virtual])
    assert _run(torch, k) == [1, number * 10]
    assert k._module._targets == [native, specific, virtual]
    assert hooks.use_target(k, specific)[1] == [native, specific, virtual]  # built once, reused


def test_explicit_arch_that_cannot_run_raises_the_rule(gpu, torch):
    major, minor = (int(v) for v in gpu["compute_capability"].split("."))
    other = "sm_80" if major != 8 else "sm_90"
    k = jitbridge.RawKernel(SOURCE, "mark", arch=other)
    with pytest.raises(ValueError, match=rf"mark: arch='{other}': {other} code runs only on compute capability "
                                         rf"{other[3:-1]}\.x; cuda:0 is {major}\.{minor}; compile with arch=None"):
        _run(torch, k)


def test_explicit_older_ptx_target_runs(gpu, torch):
    k = jitbridge.RawKernel(SOURCE, "mark", arch="compute_75")  # PTX runs on any later GPU
    assert _run(torch, k) == [1, 750]
    assert k._module._targets == ["compute_75"]


def test_each_device_arch_builds_once_through_the_cache(gpu, torch):
    k = jitbridge.RawKernel(SOURCE, "mark")
    program = k.program
    _run(torch, k)
    _run(torch, k)
    assert k._module._targets == [program.arch]
    assert np.array_equal(np.frombuffer(program.cubin, np.uint8), np.frombuffer(k.program.cubin, np.uint8))


def _fat_kernel(arch):
    try:
        return jitbridge.RawKernel(SOURCE, "mark", arch=arch)
    except jitbridge.CudaNotFoundError as e:  # the nvidia-nvfatbin wheel is not installed here
        pytest.skip(f"nvFatbin is not available: {e}")


def test_fat_binary_loads_and_the_driver_picks_the_image(gpu, torch, tmp_path):
    native = gpu["arch"]
    older = "sm_80" if native != "sm_80" else "sm_75"
    k = _fat_kernel([older, native])
    number = int(native[3:])
    assert _run(torch, k) == [1, number * 10]
    assert k._module._targets == [f"{older},{native}"]
    # The same bytes as a .fatbin file: loaded by the driver, kernels unchecked.
    path = tmp_path / "mark.fatbin"
    path.write_bytes(k.program.fatbin)
    from_file = jitbridge.RawModule(path=path).get_function("mark")
    assert from_file.signature is None
    assert _run(torch, from_file) == [1, number * 10]


def test_fat_binary_without_an_image_for_the_gpu_names_each_rule(gpu, torch):
    major, minor = (int(v) for v in gpu["compute_capability"].split("."))
    targets = ["sm_75", "sm_80"] if major >= 9 else ["sm_90", "sm_100"]
    k = _fat_kernel(targets)
    with pytest.raises(ValueError, match=rf"arch='{targets[0]},{targets[1]}': {targets[0]} code runs only on .*; "
                                         rf"{targets[1]} code runs only on .*cuda:0 is {major}\.{minor}"):
        _run(torch, k)
