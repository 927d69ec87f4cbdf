"""Pickling of Program, RawKernel, RawModule and kernels from RawModule.get_function: a small versioned state.

The state is the compile request (source, options, name expressions, headers, include paths made absolute,
arch or None, ptx, program name), never a binary nor a path of this machine's build tree: unpickling compiles
again, which the kernel cache answers when it can, and a default arch builds for the GPUs of the process that
unpickles. Modules loaded from files keep their image bytes (the other machine may lack the file).
"""

import pickle

from . import _core

# Bump when the state's meaning changes; another version is refused with an UnpicklingError that says to recompile.
STATE_VERSION = 1

# Per-kernel settings kept with a pickled kernel when the kernel has them (attributes of the RawKernel that
# unpickling sets again): the place for options such as check_args.
KERNEL_SETTINGS = ("check_args",)


def _check_version(state, what):
    version = state.get("v") if isinstance(state, dict) else None
    if version != STATE_VERSION:
        raise pickle.UnpicklingError(
            f"this {what} was pickled by a jitbridge with state version {version!r}; this one reads version "
            f"{STATE_VERSION}: recompile it from its source instead of unpickling")


def program_state(program):
    """The pickled state of a Program (TypeError for programs that were not made by compile())."""
    request = program._request
    if request is None:
        raise TypeError(f"cannot pickle {program!r}: it was not made by jitbridge.compile(), so there is no "
                        f"source to compile again")
    state = dict(request)
    state["v"] = STATE_VERSION
    return state


def rebuild_program(state):
    _check_version(state, "Program")
    arch = state["arch"]
    if arch is not None and "," in arch:  # a fat binary: its list of targets
        arch = arch.split(",")
    return _core.compile(state["code"], options=state["options"], name_expressions=state["name_expressions"],
                         headers=dict(state["headers"]), include_paths=state["include_paths"], arch=arch,
                         ptx=state["ptx"], program_name=state["program_name"])


def module_state(module):
    """The pickled state of a _core._Module: its program's state, or its image bytes."""
    image = module._image
    if image is not None:
        return {"v": STATE_VERSION, "image": image}
    return {"v": STATE_VERSION, "program": program_state(module.program)}


def rebuild_module_core(state):
    _check_version(state, "module")
    if "image" in state:
        return _core._Module._from_image(state["image"])
    return _core._Module(rebuild_program(state["program"]))


def kernel_settings(kernel):
    return {name: getattr(kernel, name) for name in KERNEL_SETTINGS if hasattr(kernel, name)}


def rebuild_kernel(module_core, name, settings, cls):
    from ._kernels import RawKernel

    if not (isinstance(cls, type) and issubclass(cls, RawKernel)):
        raise pickle.UnpicklingError(f"expected a RawKernel class, got {cls!r}")
    kernel = cls._from_module(module_core, name)
    for key, value in settings.items():
        if key not in KERNEL_SETTINGS:
            raise pickle.UnpicklingError(f"unknown kernel setting {key!r} in the pickled state: recompile it")
        setattr(kernel, key, value)
    return kernel


def rebuild_raw_module(module_core, cls, check_args=True):
    from ._kernels import RawModule

    if not (isinstance(cls, type) and issubclass(cls, RawModule)):
        raise pickle.UnpicklingError(f"expected a RawModule class, got {cls!r}")
    if not isinstance(check_args, bool):
        raise pickle.UnpicklingError(f"check_args: expected a bool in the pickled state, got {check_args!r}")
    return cls._from_core(module_core, check_args)


def _reduce_program(program):
    """Pickles a Program as its compile request: unpickling compiles again through the kernel cache (a linked
    program raises TypeError)."""
    return rebuild_program, (program_state(program),)


def _reduce_module_core(module):
    return rebuild_module_core, (module_state(module),)


_core.Program.__reduce__ = _reduce_program
_core._Module.__reduce__ = _reduce_module_core
