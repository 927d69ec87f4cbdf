"""test_pasted_style_kernels.py — pasted-style kernels compile without a GPU: the layer-norm variants of
pasted_style_kernels.py (standard headers, cooperative groups, streaming loads, C++ linkage), and optionally a
local copy of llm.c's dev/cuda/layernorm_forward.cu named by JITBRIDGE_LLMC_LAYERNORM."""

import os
from pathlib import Path

import pytest

import jitbridge
from pasted_style_kernels import KERNELS, LAYERNORM, SIGNATURE, launch_shape


def test_pasted_style_layernorm_kernels_compile_with_their_signatures():
    p = jitbridge.compile(LAYERNORM, arch="sm_90", program_name="layernorm_forward.cu", ptx=True)
    assert sorted(k.name for k in p.kernels) == sorted(KERNELS)  # no helper became a kernel
    for name in KERNELS:
        k = p.kernel(name)
        assert str(k.signature) == SIGNATURE
        assert k.lowered_name.startswith("_Z") and k.lowered_name != name  # C++ linkage: a mangled symbol
        assert k.resources.known
    # The idioms really reached the generated code: shuffles, streaming stores and loads, rsqrt.
    assert "shfl.sync.bfly" in p.ptx
    assert "st.global.cs" in p.ptx
    assert "ld.global.cs" in p.ptx
    assert "rsqrt.approx" in p.ptx
    # The block variants hold their 32 parked warp totals in static shared memory; the warp variant none.
    assert p.kernel("ln_forward_warp_per_row").resources.shared_bytes == 0
    assert p.kernel("ln_forward_block_per_row").resources.shared_bytes >= 32 * 4
    assert p.kernel("ln_forward_cached_row").resources.shared_bytes >= 32 * 4  # plus C floats given at launch


def test_pasted_style_layernorm_launch_shapes():
    assert launch_shape("ln_forward_warp_per_row", 132, 768, 256) == (17, 0)  # 8 rows a block, the last partial
    assert launch_shape("ln_forward_block_per_row", 132, 768, 256) == (132, 0)
    assert launch_shape("ln_forward_cached_row", 132, 768, 96) == (132, 768 * 4)
    with pytest.raises(KeyError):
        launch_shape("no_such_kernel", 1, 1, 32)


# NVRTC's refusal of host code; a whole llm.c dev/cuda file (main(), launchers, common.h's host helpers) meets it.
HOST_CODE_REFUSED = "host functions are not allowed in JIT mode"


def test_a_local_llmc_layernorm_forward_file_compiles_unchanged_or_skips_for_its_host_code():
    """Optional: JITBRIDGE_LLMC_LAYERNORM names a local copy of llm.c's dev/cuda/layernorm_forward.cu (with its
    common.h beside it). The file is compiled unchanged, its directory as an include path; nothing is taken
    out of it. If NVRTC refuses its host code, the test skips and says so; any other error fails."""
    path = os.environ.get("JITBRIDGE_LLMC_LAYERNORM")
    if not path:
        pytest.skip("JITBRIDGE_LLMC_LAYERNORM is not set (a local copy of llm.c's dev/cuda/layernorm_forward.cu)")
    source = Path(path)
    assert source.is_file(), f"JITBRIDGE_LLMC_LAYERNORM={path!r} is not a file"
    assert (source.parent / "common.h").is_file(), f"no common.h beside {path!r}"
    try:
        p = jitbridge.compile(source.read_text(), include_paths=[str(source.parent)], program_name=source.name,
                              arch="sm_90")
    except jitbridge.CompileError as e:
        if HOST_CODE_REFUSED in e.log:
            pytest.skip(f"{source.name} cannot compile unchanged: NVRTC compiles device code only and refuses its "
                        f"host functions ({HOST_CODE_REFUSED}; first error: {str(e).splitlines()[0][:300]}); "
                        "jitbridge does not strip host code")
        raise
    for k in (3, 4, 5):
        assert str(p.kernel(f"layernorm_forward_kernel{k}").signature) == SIGNATURE
