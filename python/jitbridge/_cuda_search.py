"""Where the nvidia-* CUDA 13 wheels of this Python environment are, for the compiled core's CUDA search.

The core cannot know site-packages, so ``jitbridge/__init__.py`` hands it the ``nvidia/cu13`` directories
found here before anything is loaded. Cheap: a stat per sys.path entry; no nvidia package is imported and
nothing is loaded.
"""

import os
import sys

__all__ = ["wheel_roots"]


def wheel_roots(path=None):
    """``<entry>/nvidia/cu13`` for each entry of ``path`` (default ``sys.path``) that has that directory, in order,
    without repeats. That is where nvidia-cuda-nvrtc, nvidia-cuda-runtime, nvidia-cuda-cccl and nvidia-nvjitlink
    put their files (``lib/libnvrtc.so.13``, ``include/cuda_fp16.h``, ``include/cccl/cuda/std``). Relative entries
    ('' is the current directory) are left out: what the working directory holds must not pick a compiler."""
    roots = []
    for entry in sys.path if path is None else path:
        if not isinstance(entry, str) or not os.path.isabs(entry):
            continue
        root = os.path.join(entry, "nvidia", "cu13")
        if os.path.isdir(root):
            root = os.path.normpath(root)
            if root not in roots:
                roots.append(root)
    return roots
