"""_opdecl.py — the vocabulary jitbridge.torch ops are declared in (Launch, Output, numel, size, dtype names) and the
checks each piece makes on its own, before it meets the other pieces of an op (torch is not imported)."""

import inspect

#: The dtype names that kernel dicts and Output(dtype=...) take (torch dtypes are converted by name).
DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "uint16", "int32", "uint32",
               "int64", "uint64", "bool")
#: The floating ones among them (a pointee of one does not follow the dispatch dtype; jitbridge.jax passes a
#: constant to a parameter of one as a float).
FLOATING = frozenset({"float32", "float64", "float16", "bfloat16"})
SCALAR_KINDS = ("float", "int", "bool")


class OpDeclarationError(ValueError):
    """A declaration that cannot work, found before anything is registered or launched: an unknown name, an
    argument that does not fit its kernel parameter, a dtype that does not match a pointee type, an output written
    through a const pointer, a declared gradient no backward launch writes. The message names the op, the launch,
    the kernel and the parameter."""



def shown(value, limit=200):
    """repr(value) for an error message, cut at `limit` characters (a declaration may hold anything, a whole source)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + " [...]"

def dtype_name(dtype):
    """The name ('float32') of a dtype given by name or as a torch dtype (read by name: torch is not imported).
    Raises OpDeclarationError for anything else."""
    name = dtype if isinstance(dtype, str) else str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name not in DTYPE_NAMES:
        raise OpDeclarationError(f"{shown(dtype)} is not a dtype jitbridge.torch knows; "
                                 f"use one of {', '.join(DTYPE_NAMES)}")
    return name


def _is_dtype(value):
    return (isinstance(value, str) and value in DTYPE_NAMES) or type(value).__name__ == "dtype"


class Query:
    """numel('x') or size('x', dim): a launch argument or grid rule read from one named tensor."""

    __slots__ = ("name", "dim")

    def __init__(self, name, dim=None):
        if not isinstance(name, str):
            raise OpDeclarationError(f"numel()/size() take a tensor name, got {shown(name)}")
        self.name, self.dim = name, dim

    @property
    def _jitbridge_names(self):
        return (self.name,)

    def __call__(self, **tensors):
        t = tensors[self.name]
        return t.numel() if self.dim is None else t.shape[self.dim]

    def env_getter(self):
        name, dim = self.name, self.dim
        if dim is None:
            return lambda env: env[name].numel()
        return lambda env: env[name].shape[dim]

    def __repr__(self):
        return f"numel({shown(self.name)})" if self.dim is None else f"size({shown(self.name)}, {self.dim})"


def numel(name):
    """A launch argument (or grid rule) giving the element count of the tensor called ``name``."""
    return Query(name)


def size(name, dim):
    """A launch argument (or grid rule) giving ``tensor.shape[dim]`` of the tensor called ``name``."""
    if not isinstance(dim, int):
        raise OpDeclarationError(f"size({shown(name)}, {shown(dim)}): dim must be an int")
    return Query(name, dim)


def _check_dims(what, value):
    if callable(value):
        return
    dims = value if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise OpDeclarationError(f"Launch: {what}= takes an int, a tuple of 1 to 3 ints, or a callable, "
                                 f"got {shown(value)}")


class Launch:
    """One kernel launch of an op.

    kernel      a RawKernel, or a dict {dtype: RawKernel} (dtype names or torch dtypes) from which the kernel is
                picked by the dtype of the op's first tensor input.
    args        one entry per kernel parameter: a str names a tensor (an input, an output, a saved tensor,
                grad_<output>, grad_<input>, a scratch tensor) or a scalar input; an int/float is a constant; a
                callable gets the named tensors as keyword arguments (those it names, or all with **kwargs) and
                returns a scalar (see numel(), size()).
    grid, block an int, a tuple of up to 3 ints, or such a callable. A grid with a zero dimension skips the launch.
    shared_mem  dynamic shared memory in bytes: an int or such a callable.
    """

    def __init__(self, kernel, *, args, grid, block, shared_mem=0):
        """Checks and keeps the launch (the arguments are the class's). Raises OpDeclarationError (a TypeError)
        naming the argument for an empty kernel dict, a kernel that is not callable, args= not a tuple or list
        (TypeError showing the one-item tuple for a bare str), or grid/block/shared_mem of the wrong form."""
        if isinstance(kernel, dict):
            if not kernel:
                raise OpDeclarationError("Launch: the kernel dict is empty")
            self.kernels = {dtype_name(k): v for k, v in kernel.items()}
        else:
            self.kernels = {None: kernel}
        for k in self.kernels.values():
            if not callable(k):
                raise OpDeclarationError(f"Launch: {shown(k)} is not a kernel "
                                         f"(a RawKernel or RawModule.get_function())")
        if isinstance(args, (str, bytes)):  # tuple() would take it one character at a time
            raise TypeError(f"Launch: args= takes a tuple with one entry per kernel parameter, got the str "
                            f"{shown(args[:80])}; write args=({shown(args[:80])},)")
        if not isinstance(args, (tuple, list)):
            raise OpDeclarationError(f"Launch: args= takes a tuple with one entry per kernel parameter, "
                                     f"got {shown(args)}")
        _check_dims("grid", grid)
        _check_dims("block", block)
        if not callable(shared_mem) and (not isinstance(shared_mem, int) or shared_mem < 0):
            raise OpDeclarationError(f"Launch: shared_mem= takes an int >= 0 or a callable, got {shown(shared_mem)}")
        self.args, self.grid, self.block, self.shared_mem = tuple(args), grid, block, shared_mem

    @property
    def keyed(self):
        """True when the kernel was given as a dict {dtype: RawKernel} (picked per call by the first tensor input's
        dtype), False for a single kernel."""
        return None not in self.kernels

    def __repr__(self):
        return f"Launch({kernels_label(self)}, args={self.args!r}, grid={self.grid!r}, block={self.block!r})"


class Output:
    """How to allocate an output, a gradient or a scratch tensor (uses shape arithmetic only, so it also works on
    fake tensors).

    ``Output(like="x")``: x's shape and dtype. ``Output(shape=fn, dtype=...)``: shape from ``fn(**tensors)`` (the
    names it asks for) or a tuple of ints; dtype a dtype name, a torch dtype, or the name of a tensor whose dtype to
    copy; by default the dtype of the op's first tensor input. ``like=`` with ``dtype=`` copies the shape only.
    """

    __slots__ = {
        "like": "The name of the tensor whose shape (and, without dtype=, dtype) the output copies, or None.",
        "shape": "None (with like=), a tuple of ints, or a callable fn(**tensors) returning the shape.",
        "dtype": "None (the first tensor input's dtype, or like='s), ('fixed', dtype name) or ('tensor', name of the "
                 "tensor whose dtype to copy).",
    }

    def __init__(self, like=None, *, shape=None, dtype=None):
        """Checks and keeps the allocation rule (the arguments are the class's). Raises OpDeclarationError (a
        TypeError) naming the argument unless exactly one of like= and shape= is given, or for a like= that is not a
        str, a shape= that is neither callable nor a tuple of ints >= 0, a dtype= that is neither a dtype nor a
        tensor name."""
        if (like is None) == (shape is None):
            raise OpDeclarationError("Output: give exactly one of like= (a tensor name) and shape= (a callable or a "
                                     "tuple of ints)")
        if like is not None and not isinstance(like, str):
            raise OpDeclarationError(f"Output: like= takes a tensor name, got {shown(like)}")
        if shape is not None and not callable(shape):
            if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise OpDeclarationError(f"Output: shape= takes a callable or a tuple of ints, got {shown(shape)}")
            shape = tuple(shape)
        if dtype is not None:
            if _is_dtype(dtype):
                dtype = ("fixed", dtype_name(dtype))
            elif isinstance(dtype, str):
                dtype = ("tensor", dtype)
            else:
                raise OpDeclarationError(f"Output: dtype= takes a dtype or a tensor name, got {shown(dtype)}")
        self.like, self.shape, self.dtype = like, shape, dtype

    def __repr__(self):
        dtype = "" if self.dtype is None else f", dtype={shown(self.dtype[1])}"
        return f"Output(like={shown(self.like)}{dtype})" if self.like else f"Output(shape={shown(self.shape)}{dtype})"


def callable_names(fn):
    """(names fn takes as keywords, whether it takes **kwargs). numel()/size() say theirs. Each name is a
    (name, required, positional) triple; positional: it may be passed by position, in this order."""
    names = getattr(fn, "_jitbridge_names", None)
    if names is not None:
        return tuple((n, True, False) for n in names), False
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return (), True
    named, takes_all = [], False
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            takes_all = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            named.append((p.name, p.default is p.empty, p.kind is p.POSITIONAL_OR_KEYWORD))
    return tuple(named), takes_all


def kernel_name(kernel):
    return getattr(kernel, "name", None) or type(kernel).__name__


def kernels_label(launch):
    if not launch.keyed:
        return kernel_name(launch.kernels[None])
    return "{" + ", ".join(f"{k}: {kernel_name(v)}" for k, v in launch.kernels.items()) + "}"
