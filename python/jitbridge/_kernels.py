"""RawKernel and RawModule: compiled kernels launched on arrays from any framework, every argument checked."""

import os

from . import _core, _pickle
from ._compile_warnings import warn_about

__all__ = ["RawKernel", "RawModule"]


class RawKernel(_core._Kernel):
    """One kernel from CUDA C++ source, compiled with NVRTC (through the kernel cache).

    Launch it CuPy's way, ``k(grid, block, args, shared_mem=0, stream=None)``, or Numba's,
    ``k[grid, block](*args)`` (also ``k[grid, block, stream, shared_mem]``). grid and block are an
    int or a tuple of up to 3 ints. Arrays may come from any framework (PyTorch, CuPy, Numba, JAX,
    jitbridge) and may be mixed; each argument is checked against the kernel's parameter types:
    the pointee type against the dtype (``void*`` takes any), read-only arrays only into const
    pointees, device memory only, all arrays on one device; scalars exactly into the parameter's
    type with range checks; structs from ``bytes`` or NumPy structured scalars of the right size.

    The launch runs on the consumer stream: ``stream=`` if given (an int handle, a torch or CuPy
    stream, or any object with ``__cuda_stream__``), else the current stream of the framework the
    first array came from, else the legacy default stream. Launches never synchronize the host, so
    they can be captured in CUDA graphs. Keyword options: ``shared_mem`` (dynamic shared memory in
    bytes; above 48 KiB the kernel's limit is raised automatically), ``cluster`` (thread-block
    cluster dims), ``cooperative``, ``programmatic_dependent``, ``check_args``.

    ``check_args=False`` (here for every launch, or per call) turns the argument checks off for
    people who know better: any array goes into any pointer parameter whatever its dtype, element
    count, alignment or read-only flag. Host memory and arrays on another device stay refused.

    The source is compiled when the RawKernel is made (compile errors raise CompileError then),
    for ``arch`` (default: the current GPU's). Raises KeyError when ``name`` is not a kernel of the
    program; its message lists the kernels there are.
    """

    def __init__(self, code, name, options=(), name_expressions=None, *, headers=None, include_paths=(),
                 arch=None, program_name="kernel.cu", check_args=True):
        """Compiles ``code`` (through the kernel cache) and picks the kernel called ``name``.

        code, options, name_expressions, headers, include_paths, arch and program_name are compile()'s (arch
        None: the current GPU's); name is the kernel's name, or a name expression for a template. check_args sets
        the check_args attribute. Raises CompileError for errors in the source, KeyError (listing the kernels there
        are) when ``name`` is not one of them, TypeError/ValueError for malformed arguments. No GPU work happens
        here: the module is loaded on a device at the kernel's first launch there.
        """
        # options and name_expressions go to compile() as given: it refuses a bare str (which
        # tuple() would split into characters) and names the argument in every error.
        exprs = name_expressions if name_expressions is not None else ()
        program = _core.compile(code, options=options, name_expressions=exprs, headers=headers,
                                include_paths=include_paths, arch=arch, program_name=program_name)
        warn_about(program, stacklevel=2)
        super().__init__(_core._Module(program), name)
        self.check_args = check_args

    @property
    def program(self):
        """The compiled Program (binary, log, all kernels), or None for kernels from files."""
        return self._module.program

    @classmethod
    def _from_module(cls, module, name):
        self = cls.__new__(cls)
        _core._Kernel.__init__(self, module, name)
        return self

    def __reduce__(self):
        """Pickles as its module's compile request (or a file's image), its name and settings: unpickling compiles
        again through the kernel cache. Kernels of one module share it in one pickle."""
        return _pickle.rebuild_kernel, (self._module, self.name, _pickle.kernel_settings(self), type(self))


_core._inherit_vectorcall(RawKernel, _core._Kernel)


def _attribute(name):
    return property(lambda self: self.attributes[name],
                    doc=f"The driver's {name} for this kernel on the current device (attributes['{name}']: an int; "
                        "loads the module there on first use; NoDriverError without a driver).")


for _name in ("num_regs", "max_threads_per_block", "shared_size_bytes", "const_size_bytes", "local_size_bytes",
              "ptx_version", "binary_version", "max_dynamic_shared_size_bytes"):
    setattr(RawKernel, _name, _attribute(_name))
del _name


class RawModule:
    """A compiled program (or a .cubin, .ptx or .fatbin file) whose kernels and globals you fetch by name.

    ``RawModule(code=source, options=..., name_expressions=[...])`` compiles through the cache;
    ``RawModule(path="kernels.cubin")`` loads a binary (its kernels have no signatures, so their
    arguments are packed by the sizes the driver reports, without type checks).

    The module owns its binary; kernels and globals taken from it keep it alive. It is loaded on a
    device (cuLibraryLoadData) at the first launch or get_global() there, never on a stream.
    repr(): ``RawModule(kernels=['saxpy'], arch='sm_90', origin='disk')`` for compiled code (origin:
    'compiled', 'memory' or 'disk', where the program came from), ``RawModule(path='k.cubin',
    image_bytes=9216)`` for a file.
    """

    def __init__(self, code=None, path=None, options=(), name_expressions=None, *, headers=None,
                 include_paths=(), arch=None, program_name="kernel.cu", check_args=True):
        """Compiles ``code`` (compile()'s other arguments as there) or reads the binary at ``path``.

        Give exactly one of code and path (TypeError otherwise). check_args is the check_args of the kernels
        get_function() hands out. Raises CompileError for errors in the source; FileNotFoundError for a missing
        path, ValueError for one that is not a .cubin, .ptx or .fatbin file or is empty. A file is read here and
        checked by the driver at its first load.
        """
        if (code is None) == (path is None):
            raise TypeError("RawModule: give exactly one of code= and path=")
        if code is not None:
            exprs = name_expressions if name_expressions is not None else ()
            program = _core.compile(code, options=options, name_expressions=exprs, headers=headers,
                                    include_paths=include_paths, arch=arch, program_name=program_name)
            warn_about(program, stacklevel=2)
            self._module = _core._Module(program)
        else:
            path = os.fspath(path)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"path: no such file: {path}")
            ext = os.path.splitext(path)[1].lower()
            if ext not in (".cubin", ".ptx", ".fatbin"):
                raise ValueError(f"path: expected a .cubin, .ptx or .fatbin file, got {path!r}")
            with open(path, "rb") as f:
                self._module = _core._Module._from_image(f.read())
        self._path = path
        self._functions = {}
        self._check_args = bool(check_args)

    @classmethod
    def _from_core(cls, module_core, check_args=True):
        self = cls.__new__(cls)
        self._module = module_core
        self._path = None
        self._functions = {}
        self._check_args = bool(check_args)
        return self

    def __reduce__(self):
        """Pickles as its compile request (or a file's image bytes), not the binary: unpickling compiles again
        through the kernel cache."""
        return _pickle.rebuild_raw_module, (self._module, type(self), self._check_args)

    @property
    def program(self):
        """The compiled Program (binary, log, kernels, origin), or None for a module loaded from a file."""
        return self._module.program

    def __repr__(self):
        """``RawModule(kernels=['saxpy'], arch='sm_90', origin='compiled')``; for a file, its path and image size."""
        program = self._module.program
        if program is not None:
            kernels = [k.name for k in program.kernels]
            return f"{type(self).__name__}(kernels={kernels!r}, arch={program.arch!r}, origin={program.origin!r})"
        where = f"path={self._path!r}, " if getattr(self, "_path", None) else ""
        return f"{type(self).__name__}({where}image_bytes={len(self._module._image or b'')})"

    @classmethod
    def from_program(cls, program):
        """A module of an already compiled or linked Program (``jitbridge.link(...)``'s result, say),
        sharing its binary (the module keeps the Program alive). TypeError when program is not a Program."""
        return cls._from_core(_core._Module(program))

    def kernel_names(self):
        """The names get_function() takes, as a new list (a file's module is loaded on the current device)."""
        return list(self._module.kernel_names())

    def get_function(self, name):
        """The kernel called ``name`` (a name expression for templates) as a RawKernel, which keeps
        this module alive; the same object for the same name. Raises KeyError listing the module's
        kernels when there is none, TypeError when name is not a str. A module from a file knows its
        kernels only once loaded: there the name is looked up at the kernel's first use on a device
        (a launch, attributes), which raises IndexError listing the kernels when there is none."""
        if not isinstance(name, str):
            raise TypeError(f"name: expected str, got {type(name).__name__}")
        k = self._functions.get(name)
        if k is None:
            k = RawKernel._from_module(self._module, name)
            k.check_args = self._check_args
            self._functions[name] = k
        return k

    def get_global(self, name):
        """A ``__device__`` or ``__constant__`` variable as a uint8 ArrayView of its bytes on the
        current device (it keeps this module alive; loads the module there first). Writing it is
        ordinary device memory traffic: order it on the stream of the launches that read it.
        Raises KeyError when there is none, NoDriverError without a driver."""
        from . import from_ptr

        try:
            ptr, size, device = self._module._global(name)
        except IndexError as e:  # std::out_of_range
            raise KeyError(str(e)) from None
        return from_ptr(ptr, (size,), "uint8", device=device, owner=self)
