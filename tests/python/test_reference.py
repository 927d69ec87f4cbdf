"""The reference the package shows: docstrings on every public name and member, help() without pybind11 internals,
Python signatures of the compiled entry points, reprs, and the hand-written stubs naming what the package has.
(The generated stub and docs/API.md are checked to be current by scripts/reference --check, a CI step.)"""

import ast
import inspect
import pydoc
import re
from pathlib import Path

import pytest

import jitbridge
import jitbridge.ipython
import jitbridge.torch
from jitbridge._bounded import split_signature

PACKAGE = Path(jitbridge.__file__).resolve().parent
SOURCE_PACKAGE = Path(__file__).resolve().parents[2] / "python" / "jitbridge"
SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template <class T> __global__ void scale(T* x, T f) { x[threadIdx.x] *= f; }
"""

# Members that are documented where they are used, not on themselves: none now (the kernels' call, a C slot, has
# its own text in place of CPython's "Call self as a function.": python/src/launch/kernels.cpp, document_call).
SLOT_MEMBERS = set()


def _public(module):
    return [(f"{module.__name__}.{name}", getattr(module, name)) for name in module.__all__]


def _documented_names():
    # jitbridge.torch's classes and their members are documented by their owner (docs/TORCH.md); its functions too,
    # which are checked here with the rest.
    return _public(jitbridge) + _public(jitbridge.ipython) + _public(jitbridge.torch)


def _doc_without_signature(obj, name):
    doc = inspect.getdoc(obj) or ""
    first, _, rest = doc.partition("\n")
    if first.startswith(name + "(") and ") -> " in first:
        return rest.strip()
    return doc.strip()


# What help() lists under "Methods defined here" besides the public names (CPython's "Return repr(self)." otherwise).
SHOWN_DUNDERS = ("__repr__", "__str__", "__reduce__")
TORCH_CLASSES = {o for _, o in _public(jitbridge.torch) if inspect.isclass(o)}


def _members(cls):
    """(name, raw attribute) of the public members a class defines or inherits from jitbridge's own classes."""
    out = []
    for name in dir(cls):
        if name.startswith("_") and name not in ("__init__", "__getitem__", "__call__") + SHOWN_DUNDERS:
            continue
        if name in SHOWN_DUNDERS and cls in TORCH_CLASSES:
            continue  # dataclass reprs there; docs/TORCH.md documents those classes
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner is None or owner.__module__ in ("builtins",) or owner.__module__.startswith("pybind11"):
            continue
        out.append((name, inspect.getattr_static(cls, name)))
    return out


@pytest.mark.parametrize("qualname,obj", _documented_names(), ids=[n for n, _ in _documented_names()])
def test_every_public_name_has_a_docstring(qualname, obj):
    name = qualname.rpartition(".")[2]
    assert _doc_without_signature(obj, name), f"{qualname} has no docstring"


CLASSES = [(n, o) for n, o in _documented_names() if inspect.isclass(o)]
# What Python shows for a member without a docstring of its own (an __init__ inherits object's "Initialize self.
# See help(type(self)) for accurate signature."): not a docstring.
BOILERPLATE = {inspect.getdoc(getattr(object, n)) for n in dir(object)} | {inspect.getdoc(type.__call__)}


@pytest.mark.parametrize("qualname,cls", CLASSES, ids=[n for n, _ in CLASSES])
def test_every_public_member_has_a_docstring(qualname, cls):
    missing = []
    for name, raw in _members(cls):
        if name in SLOT_MEMBERS:
            continue
        if isinstance(raw, (staticmethod, classmethod)):
            raw = raw.__func__
        doc = raw.__doc__ if isinstance(raw, property) or inspect.isdatadescriptor(raw) else None
        if doc is None:
            doc = _doc_without_signature(getattr(cls, name), name)
        if not (doc or "").strip() or doc.strip() in BOILERPLATE:
            missing.append(name)
    assert not missing, f"{qualname}: no docstring on {missing}"


def test_the_members_check_sees_the_compiled_ones():
    # The walk above must reach the compiled properties and methods (inherited by RawKernel from _Kernel), or it
    # would pass on classes it never looked into.
    names = {n for n, _ in _members(jitbridge.RawKernel)}
    assert {"signature", "resources", "attributes", "name", "max_active_blocks_per_sm", "__getitem__",
            "__init__", "program", "num_regs", "check_args"} <= names
    assert {"kernel", "kernels", "origin", "arch"} <= {n for n, _ in _members(jitbridge.Program)}


# What help() must not show: C++ type names, pybind11's function record type, the compiled module in place of the
# public jitbridge.<Name>, unnamed parameters.
INTERNALS = re.compile(r"jitbridge::python|std::|pybind11_detail|self: jitbridge\._core|"
                       r"(?:->|:) jitbridge\._core\.[A-Z]|\barg[0-9]\b")


# pydoc from Python 3.12 on notes after a compiled method where its function object came from (" from
# jitbridge.pybind11_detail_function_record_..."): the interpreter's note on every pybind11 method, not part of the
# signature this test is about; it is cut before matching.
PYDOC_NOTE = re.compile(r" from [\w.]*pybind11_detail_function_record\w*$")


@pytest.mark.parametrize("qualname,obj", _documented_names(), ids=[n for n, _ in _documented_names()])
def test_help_shows_no_binding_internals(qualname, obj):
    text = "\n".join(PYDOC_NOTE.sub("", line) for line in
                     pydoc.render_doc(obj, renderer=pydoc.plaintext).splitlines())
    bad = [line.strip() for line in text.splitlines() if INTERNALS.search(line)]
    assert not bad, f"help({qualname}) shows binding internals:\n" + "\n".join(bad)


def test_help_of_a_kernel_call_says_how_to_launch():
    k = jitbridge.RawKernel(SAXPY, "saxpy", arch="sm_90")
    for call, start in ((jitbridge.RawKernel.__call__, "Launches the kernel, CuPy's form: kernel(grid, block, args"),
                        (k[1, 32].__call__, "Launches the kernel with the configuration of kernel[grid, block]")):
        assert inspect.getdoc(call).startswith(start)
        assert "Call self as a function" not in pydoc.render_doc(call, renderer=pydoc.plaintext)
    assert str(inspect.signature(jitbridge.RawKernel.__call__)) == "(self, /, *args, **options)"
    assert jitbridge.RawKernel.__flags__ & (1 << 11)  # Py_TPFLAGS_HAVE_VECTORCALL: still the fast call


def test_help_of_raw_kernel_shows_the_public_constructor():
    text = pydoc.render_doc(jitbridge.RawKernel, renderer=pydoc.plaintext)
    init = text[text.index("__init__("):]
    init = re.split(r"\n \|  (?=\S)", init)[0]      # up to the next member's line
    first = init.partition("\n")[0]
    assert "code" in first and "name" in first and "module" not in first
    assert "_Module" not in init and "Raises CompileError" in init
    assert list(inspect.signature(jitbridge.RawKernel).parameters)[:3] == ["code", "name", "options"]


def test_compiled_functions_have_python_signatures():
    def names(fn):
        return [(p.name, p.kind.name) for p in inspect.signature(fn).parameters.values()]

    assert names(jitbridge.compile)[:2] == [("code", "POSITIONAL_OR_KEYWORD"), ("options", "KEYWORD_ONLY")]
    assert names(jitbridge.from_ptr) == [(n, "POSITIONAL_OR_KEYWORD") for n in
                                          ("ptr", "shape", "dtype", "device", "strides", "owner", "readonly", "stream")]
    assert names(jitbridge.link)[0] == ("inputs", "VAR_POSITIONAL")
    assert [n for n, _ in names(jitbridge.link)[1:]] == ["arch", "lto", "options", "device_runtime"]
    assert names(jitbridge.cache_info) == []
    assert str(inspect.signature(jitbridge.Program.kernel)) == "(self, name: str) -> jitbridge.Kernel"
    assert str(inspect.signature(jitbridge.nvrtc_version)) == "() -> tuple[int, int]"
    # help() starts with that signature, and the docstring no longer repeats pybind11's line.
    text = pydoc.render_doc(jitbridge.cache_info, renderer=pydoc.plaintext)
    assert "cache_info() -> dict\n" in text and text.count("cache_info()") == 1
    for fn in (jitbridge.cache_info, jitbridge.link, jitbridge.empty, jitbridge.synchronize):
        assert fn.__module__ == "jitbridge"


def test_split_signature_reads_pybind11_lines():
    def fake(doc, name="f"):
        def f():
            pass
        f.__doc__, f.__name__ = doc, name
        return f

    sig, rest = split_signature(fake(
        "f(a: tuple[int, int] = (1, 2), *, b: dict[str, int] = {}, c: str = 'x, y') -> list[int]\n\nBody."))
    assert str(sig) == "(a: tuple[int, int] = (1, 2), *, b: dict[str, int] = {}, c: str = 'x, y') -> list[int]"
    assert rest == "Body."
    sig, _ = split_signature(fake("f(self: object, x: int, /, *args, **kwargs) -> None\n"))
    assert str(sig) == "(self, x: int, /, *args, **kwargs) -> None"
    # Not pybind11's line (another name, no return type, no docstring): nothing is made up.
    assert split_signature(fake("g(a: int) -> int\nText")) == (None, "g(a: int) -> int\nText")
    assert split_signature(fake("f(a)\nText")) == (None, "f(a)\nText")
    assert split_signature(fake(None)) == (None, "")


# ---- reprs (no GPU needed: compiling and loading nothing on a device) ----------------------------------------------

@pytest.fixture(scope="module")
def module():
    return jitbridge.RawModule(code=SAXPY, name_expressions=["scale<float>"], arch="sm_90")


def test_raw_module_repr_shows_kernels_arch_and_origin(module):
    program = module.program
    names = [k.name for k in program.kernels]  # binary order
    assert sorted(names) == ["saxpy", "scale<float>"]
    assert repr(module) == f"RawModule(kernels={names!r}, arch='sm_90', origin='{program.origin}')"
    again = jitbridge.RawModule(code=SAXPY, name_expressions=["scale<float>"], arch="sm_90")
    assert again.program.origin == "memory" and repr(again).endswith("origin='memory')")
    linked_kind = jitbridge.RawModule.from_program(jitbridge.compile(SAXPY, arch="sm_80"))
    assert repr(linked_kind) == "RawModule(kernels=['saxpy'], arch='sm_80', origin='compiled')"


def test_raw_module_repr_of_a_file(module, tmp_path):
    path = tmp_path / "saxpy.cubin"
    path.write_bytes(module.program.cubin)
    from_file = jitbridge.RawModule(path=path)
    assert repr(from_file) == f"RawModule(path={str(path)!r}, image_bytes={len(module.program.cubin)})"
    assert from_file.program is None


def test_reprs_of_compiled_objects(module):
    program = module.program
    kernel = program.kernel("saxpy")
    names = ", ".join(k.name for k in program.kernels)
    assert sorted(names.split(", ")) == ["saxpy", "scale<float>"]
    assert repr(program) == f"<Program kernel.cu for sm_90: 2 kernels ({names}), {program.origin}>"
    registers = kernel.resources.registers
    assert registers > 0
    assert repr(kernel) == f"<Kernel saxpy(float, float const*, float*, int) regs={registers}>"
    assert repr(kernel.signature) == "<Signature (float, float const*, float*, int)>"
    assert repr(kernel.signature[1]) == "<Param pointer float const* size=8 align=8>"
    assert repr(kernel.resources).startswith(f"<Resources regs={registers} smem=0 ")
    raw = module.get_function("scale<float>")
    assert repr(raw) == "<RawKernel scale<float>(float*, float)>"
    assert repr(raw[(2, 3), 64]) == "<scale<float>[(2, 3, 1), (64, 1, 1)]>"


# ---- the hand-written stubs name what the package has --------------------------------------------------------------

def _stub_names(path):
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names, {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _class_members(node):
    return {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | \
           {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def test_stubs_ship_with_the_package():
    for name in ("py.typed", "__init__.pyi", "_core.pyi", "_kernels.pyi", "_errors.pyi"):
        assert (SOURCE_PACKAGE / name).is_file(), name


def test_package_stub_names_everything_in_all():
    names, _ = _stub_names(SOURCE_PACKAGE / "__init__.pyi")
    missing = set(jitbridge.__all__) - names
    assert not missing, f"python/jitbridge/__init__.pyi lacks {sorted(missing)} (add them with their types)"


def test_kernel_stubs_name_every_public_member():
    _, kernels = _stub_names(SOURCE_PACKAGE / "_kernels.pyi")
    _, core = _stub_names(SOURCE_PACKAGE / "_core.pyi")
    raw_kernel = _class_members(kernels["RawKernel"]) | _class_members(core["_Kernel"])
    raw_module = _class_members(kernels["RawModule"])
    for cls, stubbed in ((jitbridge.RawKernel, raw_kernel), (jitbridge.RawModule, raw_module)):
        public = {n for n in dir(cls) if not n.startswith("_")}
        assert not public - stubbed, f"{cls.__name__}: the stub lacks {sorted(public - stubbed)}"


def test_error_stubs_name_every_attribute():
    _, errors = _stub_names(SOURCE_PACKAGE / "_errors.pyi")
    made = {jitbridge.CompileError: jitbridge.CompileError("x"), jitbridge.LinkError: jitbridge.LinkError("x"),
            jitbridge.DriverError: jitbridge.DriverError("x"), jitbridge.LaunchError: jitbridge.LaunchError("x")}
    for cls, instance in made.items():
        assert set(vars(instance)) <= _class_members(errors[cls.__name__]), cls.__name__


@pytest.mark.parametrize("cls, maker", [("Program", "compile() and link()"), ("Kernel", "Program.kernels"),
                                        ("Signature", "Kernel.signature"), ("Param", "Signature.params"),
                                        ("Resources", "Kernel.resources"),
                                        ("ArrayView", "as_array() and from_ptr()"),
                                        ("Tensor", "empty(), zeros(), empty_like() and asarray()")])
def test_classes_made_by_others_say_what_gives_them(cls, maker):
    t = getattr(jitbridge, cls)
    # ArrayView and Tensor have no tp_new at all (an instance without its C++ object cannot exist): Python's own
    # "cannot create" TypeError; the others raise from __init__, naming what gives them.
    refused = (rf"^cannot create 'jitbridge\._core\.{cls}' instances" if cls in ("ArrayView", "Tensor")
               else rf"^jitbridge\.{cls} is not made directly: {re.escape(maker)}")
    with pytest.raises(TypeError, match=refused):
        t()
    text = pydoc.render_doc(t, renderer=pydoc.plaintext)
    assert "Initialize self" not in text and f"Not made directly: {maker}" in text
