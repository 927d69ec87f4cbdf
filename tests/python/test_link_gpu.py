"""On a GPU: dynamic parallelism from RawKernel/RawModule with -dc / -rdc, and an LTO link of two programs that runs."""

import numpy as np
import pytest

import jitbridge
from test_link import CALLEE, CALLER

pytestmark = pytest.mark.gpu

PARENT_CHILD = r"""
extern "C" __global__ void child(int* out, int base, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = base + 3 * i;
}
extern "C" __global__ void parent(int* out, int base, int n) {
  if (threadIdx.x == 0 && blockIdx.x == 0) child<<<(n + 127) / 128, 128>>>(out, base, n);
}
"""
@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return torch


@pytest.mark.parametrize("flag", ["-dc", "-rdc=true"])
def test_dynamic_parallelism_from_rawkernel(gpu, torch, flag):
    n = 1000
    base = int(np.random.default_rng().integers(1, 1 << 20))
    out = torch.full((n,), -7, dtype=torch.int32, device="cuda")  # poison
    parent = jitbridge.RawKernel(PARENT_CHILD, "parent", options=(flag,))
    assert parent.program.linked
    parent(1, 32, (out, base, n))
    torch.cuda.synchronize()
    expected = base + 3 * np.arange(n, dtype=np.int64)
    assert np.array_equal(out.cpu().numpy().astype(np.int64), expected)


def test_dynamic_parallelism_from_rawmodule(gpu, torch):
    n = 777
    base = int(np.random.default_rng().integers(1, 1 << 20))
    out = torch.full((n,), -7, dtype=torch.int32, device="cuda")
    module = jitbridge.RawModule(code=PARENT_CHILD, options=("-rdc=true",))
    module.get_function("parent")(1, 1, (out, base, n))
    torch.cuda.synchronize()
    assert np.array_equal(out.cpu().numpy().astype(np.int64), base + 3 * np.arange(n, dtype=np.int64))
    # The child is a kernel of the module too, launchable from the host.
    out2 = torch.full((n,), -7, dtype=torch.int32, device="cuda")
    module.get_function("child")((n + 127) // 128, 128, (out2, base + 1, n))
    torch.cuda.synchronize()
    assert np.array_equal(out2.cpu().numpy().astype(np.int64), base + 1 + 3 * np.arange(n, dtype=np.int64))


@pytest.mark.parametrize("flag", ["-dlto", "-dc"])
def test_link_of_two_programs_runs(gpu, torch, flag):
    n = 4099
    k = int(np.random.default_rng().integers(2, 50))
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    y = torch.full((n,), float("nan"), device="cuda", dtype=torch.float32)
    linked = jitbridge.link(jitbridge.compile(CALLER, options=[flag]), jitbridge.compile(CALLEE, options=[flag]))
    assert linked.linked
    apply = jitbridge.RawModule.from_program(linked).get_function("apply")
    apply((n + 255) // 256, 256, (x, y, n, k))
    torch.cuda.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), x.cpu().numpy() * k + 1.0, rtol=1e-6, atol=1e-5)


def test_unlinked_code_is_refused_with_a_clear_message(gpu, torch, tmp_path):
    """Modules load on first use: the refusal comes at the launch, instead of CUDA_ERROR_INVALID_IMAGE."""
    caller = jitbridge.compile(CALLER, options=["-dc"])
    assert not caller.linked
    x = torch.ones(8, device="cuda")
    y = torch.zeros(8, device="cuda")
    with pytest.raises(ValueError, match="not linked"):
        jitbridge.RawModule.from_program(caller).get_function("apply")(1, 8, (x, y, 8, 2))
    path = tmp_path / "caller.cubin"
    path.write_bytes(caller.link_input)
    with pytest.raises(ValueError, match="relocatable"):
        jitbridge.RawModule(path=path).get_function("_Z5applyPKfPfii")(1, 8, (x, y, 8, 2))


@pytest.mark.parametrize("flag", ["-dlto", "-dc"])
def test_the_probe_free_cubin_users_get_from_a_link_loads_and_runs(gpu, torch, tmp_path, flag):
    # Program.cubin of a link is linked again from the programs without jitbridge's layout probe
    # (test_output_symbols.py): that image, as a file, must load and compute the same.
    n = 2053
    k = int(np.random.default_rng().integers(2, 50))
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    y = torch.full((n,), float("nan"), device="cuda", dtype=torch.float32)
    linked = jitbridge.link(jitbridge.compile(CALLER, options=[flag]), jitbridge.compile(CALLEE, options=[flag]))
    path = tmp_path / "linked.cubin"
    path.write_bytes(linked.cubin)
    assert b"__jitbridge" not in path.read_bytes()
    apply = jitbridge.RawModule(path=path).get_function(linked.kernel("apply").lowered_name)
    apply((n + 255) // 256, 256, (x, y, n, k))
    torch.cuda.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), x.cpu().numpy() * k + 1.0, rtol=1e-6, atol=1e-5)
