"""jitbridge_build_backend — pyproject.toml's PEP 517 backend: scikit-build-core, plus the CUDA header wheels.

The build needs only CUDA *headers* (cuda.h, cudaTypedefs.h, cuda_fp16.h/cuda_bf16.h with the crt/ and nv/target
headers they include, nvrtc.h; nvJitLink.h when present): no CUDA library is linked. When no toolkit provides them,
the wheels that do (nvidia-cuda-runtime, nvidia-cuda-crt, nvidia-cuda-cccl, nvidia-cuda-nvrtc, nvidia-nvjitlink)
become build requirements, so `pip install .` works on a machine with PyPI and no toolkit; CMake then finds them in
the isolated build environment (cmake/JitbridgeCudaHeaders.cmake). With a toolkit nothing is added.

The toolkit is looked for where CMake looks: $JITBRIDGE_CUDA_INCLUDE_DIR, $CUDA_HOME/include, $CUDA_PATH/include, the
include/ beside nvcc on PATH, /usr/local/cuda/include. JITBRIDGE_BUILD_CUDA_FROM_WHEELS=1 adds the wheels anyway (and
makes CMake prefer them). Every other hook is scikit-build-core's, unchanged; an sdist needs nothing extra.
"""
import os
import shutil

from scikit_build_core import build as _skbuild
from scikit_build_core.build import (  # noqa: F401  (re-exported hooks)
    build_editable,
    build_sdist,
    build_wheel,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

# cuda_fp16.h/cuda_bf16.h include crt/host_defines.h (nvidia-cuda-crt: CUDA 13 moved it out of the runtime wheel) and
# <nv/target> (nvidia-cuda-cccl).
CUDA_HEADER_WHEELS = ["nvidia-cuda-runtime==13.*", "nvidia-cuda-crt==13.*", "nvidia-cuda-cccl==13.*",
                      "nvidia-cuda-nvrtc==13.*", "nvidia-nvjitlink==13.*"]


def toolkit_include_dir():
    """The first candidate directory holding both cuda.h and nvrtc.h, or None."""
    candidates = []
    explicit = os.environ.get("JITBRIDGE_CUDA_INCLUDE_DIR")
    if explicit:
        candidates.append(explicit)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "include"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include"))
    candidates.append("/usr/local/cuda/include")
    for d in candidates:
        if os.path.isfile(os.path.join(d, "cuda.h")) and os.path.isfile(os.path.join(d, "nvrtc.h")):
            return d
    return None


def cuda_header_requirements():
    """The wheels to add: all of CUDA_HEADER_WHEELS when forced or when no toolkit is seen, else none."""
    if os.environ.get("JITBRIDGE_BUILD_CUDA_FROM_WHEELS") == "1" or toolkit_include_dir() is None:
        return list(CUDA_HEADER_WHEELS)
    return []


def get_requires_for_build_wheel(config_settings=None):
    return list(_skbuild.get_requires_for_build_wheel(config_settings)) + cuda_header_requirements()


def get_requires_for_build_editable(config_settings=None):
    return list(_skbuild.get_requires_for_build_editable(config_settings)) + cuda_header_requirements()
