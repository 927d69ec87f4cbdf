"""scripts/reference.py — generates the reference files from the built package: the stub of the compiled core
(python/jitbridge/_core.pyi, by pybind11-stubgen) and the API reference (docs/API.md, from the docstrings).
Run through scripts/reference, which puts the build first on PYTHONPATH and checks the results; here:
    python scripts/reference.py stubs OUTDIR   writes OUTDIR/jitbridge/_core.pyi
    python scripts/reference.py api OUTFILE    writes the API reference
"""

import importlib
import inspect
import pathlib
import re
import sys
import types

# The modules of the API reference, in order, with what each is about. jitbridge.torch imports without torch;
# jitbridge.jax needs JAX (scripts/reference installs it, CPU only).
MODULES = [
    ("jitbridge", "Compile CUDA C++, inspect the result, launch kernels on arrays from any framework."),
    ("jitbridge.allocators", "Where jitbridge's own Tensors get their memory: the allocator protocol, scopes, and "
                             "adapters for CuPy, RMM and torch (imported only when they allocate)."),
    ("jitbridge.torch", "PyTorch ops and autograd Functions run by jitbridge kernels (docs/TORCH.md)."),
    ("jitbridge.jax", "jitbridge kernels and ops inside jax.jit, jax.grad and jax.vmap, as XLA custom calls "
                      "(imports JAX)."),
    ("jitbridge.ipython", "The %%cuda_kernel cell magic (%load_ext jitbridge)."),
]

# Classes the compiled core defines but the package re-exports under jitbridge.<Name>.
CORE_PUBLIC = ("Program", "Kernel", "Signature", "Param", "Resources", "ArrayView", "Tensor")


def stubs(outdir):
    """The compiled core's stub, by pybind11-stubgen. The public classes say __module__ 'jitbridge' (so that
    help() names them so); for the stub they are put back in jitbridge._core, where they are defined, and
    object addresses (the _internals capsule's repr) are dropped so the output is the same on every run."""
    import jitbridge  # noqa: F401 - sets the module names the stub then undoes
    from jitbridge import _core
    from pybind11_stubgen import main

    for name in CORE_PUBLIC:
        getattr(_core, name).__module__ = "jitbridge._core"
    # What the package adds to the compiled classes in Python is not the core's: pickling's __reduce__
    # (_pickle.py) is left out of the stub, and the bounded() wrappers (_bounded.py) give way to the compiled
    # methods they wrap.
    added = [(cls, name, value) for cls in vars(_core).values() if isinstance(cls, type)
             for name, value in list(vars(cls).items()) if isinstance(value, types.FunctionType)]
    for cls, name, value in added:
        if hasattr(value, "__wrapped__"):
            setattr(cls, name, value.__wrapped__)
        else:
            delattr(cls, name)
    argv = sys.argv
    sys.argv = ["pybind11-stubgen", "jitbridge._core", "-o", str(outdir), "--exit-code"]
    try:
        main()
    finally:
        sys.argv = argv
        for name in CORE_PUBLIC:
            getattr(_core, name).__module__ = "jitbridge"
        for cls, name, value in added:
            setattr(cls, name, value)
    path = pathlib.Path(outdir, "jitbridge", "_core.pyi")
    text = re.sub(r" at 0x[0-9a-fA-F]+>", ">", path.read_text())
    # compile()'s include_paths annotation names os.PathLike, whose module pybind11-stubgen does not import.
    if "os.PathLike" in text and "\nimport os\n" not in text:
        text = text.replace("\nimport collections.abc\n", "\nimport collections.abc\nimport os\n", 1)
    path.write_text(text)


# ---- the API reference ----------------------------------------------------------------------------------------

def _signature(obj, name):
    from jitbridge._bounded import split_signature

    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):  # a compiled function: the signature pybind11 wrote in its docstring
        sig = split_signature(obj)[0]
    return name + (str(sig) if sig is not None else "(...)")


def _doc_body(obj, name):
    doc = inspect.getdoc(obj) or ""
    first, _, rest = doc.partition("\n")
    if first.startswith(name + "(") and ") -> " in first:  # pybind11's signature line: shown as the heading
        doc = rest.lstrip("\n")
    return doc.strip()


# What Python shows for a member without a docstring of its own: object's ("Initialize self.  See help(type(self))
# for accurate signature.", inherited by an __init__ without one) and a C slot's ("Call self as a function.").
BOILERPLATE = {inspect.getdoc(getattr(object, n)) for n in dir(object)} | {inspect.getdoc(type.__call__)}
UNDOCUMENTED = []  # the entries api() found without a real docstring: it fails listing them


def _block(text, where):
    # Docstrings are plain text laid out in columns: kept as written.
    if not text or text in BOILERPLATE:
        UNDOCUMENTED.append(where)
        return "*(no docstring)*\n"
    return "```text\n" + text + "\n```\n"


def _members(cls):
    """(kind, name, object) of a class's documented members, the inherited compiled ones included."""
    out = []
    for name in sorted(dir(cls)):
        if name.startswith("_") and name not in ("__init__", "__call__", "__getitem__"):
            continue
        if name == "__init__" and not inspect.isfunction(vars(cls).get("__init__")):
            continue  # no constructor of its own (the compiled classes are made by functions, not by hand)
        owner = next((k for k in cls.__mro__ if name in vars(k)), object)
        if owner.__module__ == "builtins":
            continue  # BaseException's args, with_traceback, ...
        try:
            raw = inspect.getattr_static(cls, name)
        except AttributeError:
            continue
        if name in ("__call__", "__getitem__") and not any(name in vars(k) for k in cls.__mro__[:-1]):
            continue
        if isinstance(raw, (staticmethod, classmethod)):
            out.append(("method", name, getattr(cls, name)))
        elif isinstance(raw, property) or inspect.isdatadescriptor(raw):
            out.append(("property", name, raw))
        elif callable(raw):
            out.append(("method", name, getattr(cls, name)))
        elif not inspect.ismodule(raw):
            out.append(("attribute", name, raw))
    return out


def _section(qualname, obj, out):
    name = qualname.rpartition(".")[2]
    if inspect.isclass(obj):
        bases = [b.__name__ for b in obj.__bases__
                 if b is not object and not b.__module__.startswith("pybind11") and not b.__name__.startswith("_")]
        out.append(f"### class `{qualname}`" + (f" ({', '.join(bases)})" if bases else "") + "\n\n")
        out.append(_block(inspect.getdoc(obj) or "", qualname))
        for kind, member, value in _members(obj):
            if member == "__call__" and "__call__" not in vars(obj):
                continue  # the compiled kernels' call: the class docstring says how to call them
            if kind == "property":
                out.append(f"\n#### `{name}.{member}` (property)\n\n")
                # A __slots__ member's text is in the class's __slots__ dict, where inspect.getdoc finds it.
                doc = getattr(value, "__doc__", None) or (inspect.getdoc(value) if inspect.ismemberdescriptor(value)
                                                          else None)
                out.append(_block((doc or "").strip(), f"{qualname}.{member}"))
            elif kind == "method":
                out.append(f"\n#### `{name}.{_signature(value, member)}`\n\n")
                out.append(_block(_doc_body(value, member), f"{qualname}.{member}"))
            else:
                out.append(f"\n#### `{name}.{member}` = `{value!r}`\n\n")
    else:
        out.append(f"### `{qualname.rpartition('.')[0]}.{_signature(obj, name)}`\n\n")
        out.append(_block(_doc_body(obj, name), qualname))
    out.append("\n")


def api(outfile):
    """docs/API.md: every name of each module's __all__, in __all__'s order, with its signature and docstring."""
    out = ["# jitbridge API reference\n\n",
           "Generated from the docstrings by `scripts/reference` (do not edit; CI checks that it is current).\n",
           "`help(jitbridge.X)` shows the same text.\n\n"]
    for module_name, about in MODULES:
        out.append(f"- [`{module_name}`](#{module_name.replace('.', '')}): {about}\n")
    out.append("\n")
    for module_name, about in MODULES:
        module = importlib.import_module(module_name)
        out.append(f"## {module_name}\n\n{about}\n\n")
        for name in module.__all__:
            _section(f"{module_name}.{name}", getattr(module, name), out)
    text = "".join(out)
    text = re.sub(r" at 0x[0-9a-fA-F]+>", ">", text)
    pathlib.Path(outfile).write_text(text.rstrip("\n") + "\n")
    if UNDOCUMENTED:
        sys.exit("docs/API.md: no docstring of its own (Python's boilerplate or none) on:\n  " +
                 "\n  ".join(UNDOCUMENTED) + "\nwrite one in the source, then run scripts/reference")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("stubs", "api"):
        sys.exit(__doc__)
    stubs(sys.argv[2]) if sys.argv[1] == "stubs" else api(sys.argv[2])
