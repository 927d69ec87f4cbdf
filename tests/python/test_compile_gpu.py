"""On a machine with a GPU: the default target is the GPU's, and compiling for it gives a cubin with known resources."""

import pytest

import jitbridge

pytestmark = pytest.mark.gpu

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_driver_reports_the_gpu(gpu):
    info = jitbridge.driver_info()
    assert info["found"] and info["reason"] is None
    assert info["version"] >= 12000
    assert gpu["ordinal"] == 0
    assert gpu["name"]
    assert gpu["total_memory"] > 0
    assert gpu["arch"] == "sm_" + gpu["compute_capability"].replace(".", "")


def test_default_arch_is_the_gpus(gpu):
    major, minor = gpu["compute_capability"].split(".")
    assert jitbridge.default_arch() == f"sm_{major}{minor}"


def test_compile_for_the_device_arch(gpu):
    program = jitbridge.compile(SAXPY)  # no arch: the GPU's
    assert program.arch == gpu["arch"]
    assert program.cubin[:4] == b"\x7fELF"
    kernel = program.kernel("saxpy")
    assert str(kernel.signature) == "(float, float const*, float*, int)"
    assert kernel.resources.known
    assert kernel.resources.registers > 0
    explicit = jitbridge.compile(SAXPY, arch=gpu["arch"])
    assert explicit.cubin == program.cubin
