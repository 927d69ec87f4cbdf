"""What the reference (docstrings, docs/API.md) says about the device-side members, checked on a GPU: the driver
attributes, the occupancy helpers, modules from files, globals and synchronize(). CPU-side claims: test_reference.py.
"""
import pytest

import jitbridge

pytestmark = pytest.mark.gpu

SOURCE = r'''
__constant__ float coefficients[4];
__device__ int counter;
extern "C" __global__ void staged(const float* x, float* y, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] * coefficients[i & 3] : 0.0f;
  __syncthreads();
  if (i < n) y[i] = tile[blockDim.x - 1 - threadIdx.x];
}'''

ATTRIBUTES = ("num_regs", "max_threads_per_block", "shared_size_bytes", "const_size_bytes", "local_size_bytes",
              "ptx_version", "binary_version", "max_dynamic_shared_size_bytes")


@pytest.fixture(scope="module")
def kernel():
    return jitbridge.RawKernel(SOURCE, "staged")  # arch None: the current GPU's


def test_attribute_properties_are_the_drivers_values(kernel, gpu):
    attributes = kernel.attributes
    doc = type(kernel).attributes.__doc__
    for name in ATTRIBUTES:
        assert name in doc, name
        assert isinstance(attributes[name], int), name
        assert getattr(kernel, name) == attributes[name], name
    # What ptxas reported (Kernel.resources) and what the driver reports of the loaded cubin agree.
    assert attributes["num_regs"] == kernel.resources.registers > 0
    assert attributes["shared_size_bytes"] == kernel.resources.shared_bytes == 256 * 4
    # Compiled for the current GPU: the binary's version is its compute capability (sm_90 -> 90).
    assert kernel.program.arch == gpu["arch"]
    assert attributes["binary_version"] == int(gpu["compute_capability"].replace(".", ""))


def test_occupancy_helpers_follow_their_docstrings(kernel):
    min_grid, block = kernel.suggest_block_size()
    assert min_grid >= 1 and 1 <= block <= kernel.max_threads_per_block
    _, limited = kernel.suggest_block_size(block_size_limit=64)
    assert 1 <= limited <= 64
    blocks = kernel.max_active_blocks_per_sm(block)
    assert blocks >= 1
    # More dynamic shared memory per block never fits more blocks.
    assert kernel.max_active_blocks_per_sm(128, shared_mem=32 * 1024) <= kernel.max_active_blocks_per_sm(128)
    with pytest.raises(ValueError, match="block_size"):
        kernel.max_active_blocks_per_sm(0)
    with pytest.raises(ValueError, match="shared_mem"):
        kernel.max_active_blocks_per_sm(128, shared_mem=-1)


def test_module_from_a_file_as_documented(tmp_path):
    program = jitbridge.compile(SOURCE)
    path = tmp_path / "staged.cubin"
    path.write_bytes(program.cubin)
    module = jitbridge.RawModule(path=path)
    shown = f"RawModule(path={str(path)!r}, image_bytes={len(program.cubin)})"
    assert repr(module) == shown
    assert module.kernel_names() == ["staged"]  # loads the module on the current device
    assert repr(module) == shown and module.program is None
    k = module.get_function("staged")
    assert module.get_function("staged") is k
    assert k.signature is None and k.resources is None and k.program is None
    assert repr(k) == "<RawKernel staged(...)>"
    assert k.num_regs == program.kernel("staged").resources.registers
    missing = module.get_function("missing")  # a file's kernels are known only once loaded: checked at first use
    with pytest.raises(IndexError, match="no kernel 'missing' in this module; it has: staged"):
        missing.attributes


def test_get_global_is_a_uint8_view_keeping_the_module(gpu):
    module = jitbridge.RawModule(code=SOURCE)
    view = module.get_global("coefficients")
    assert (view.dtype, view.shape, view.device, view.nbytes) == ("uint8", (16,), f"cuda:{gpu['ordinal']}", 16)
    assert view.obj is module and view.ptr != 0
    assert module.get_global("counter").shape == (4,)
    with pytest.raises(KeyError):
        module.get_global("no_such_global")


def test_synchronize_as_documented(gpu):
    assert jitbridge.synchronize() is None
    assert jitbridge.synchronize(gpu["ordinal"]) is None
    with pytest.raises(ValueError, match="device"):
        jitbridge.synchronize(-1)
    with pytest.raises(ValueError, match="does not exist"):
        jitbridge.synchronize(len(jitbridge.driver_info()["devices"]))
    with pytest.raises(TypeError):
        jitbridge.synchronize("cuda:0")
