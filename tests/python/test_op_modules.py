"""The op declaration modules (python/jitbridge/_opdecl.py, _opexpr.py, _opphase.py, _opspec.py, shared by
jitbridge.torch and jitbridge.jax) and the jitbridge/torch/ package talk to each other through public names
(docs/DESIGN.md, "jitbridge.torch"; issue 25): no `from .X import _name` between them; nor does any other module of
the package (jax.py and _jaxop.py share _jaxcall.py, cli.py and ipython.py share _argv.py). Read from the sources
(ast), so no torch or JAX is needed."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "jitbridge"
MODULES = sorted(PACKAGE.rglob("*.py"))


def private_imports(text):
    """(line, module, name) for each underscore name that a relative `from ... import` takes from a sibling module
    (`from .. import _core`, a module of its own, is not a name of a sibling's)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level and node.module:
            found += [(node.lineno, "." * node.level + node.module, a.name) for a in node.names
                      if a.name.startswith("_")]
    return found


def test_the_modules_are_there():
    names = {p.relative_to(PACKAGE).as_posix() for p in MODULES}
    assert {"_opdecl.py", "_opexpr.py", "_opphase.py", "_opspec.py", "torch/__init__.py", "torch/compiled.py",
            "torch/description.py", "torch/addon.py", "jax.py", "_jaxop.py", "_jaxcall.py", "cli.py", "ipython.py",
            "_argv.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_module_imports_a_siblings_underscore_name(path):
    assert private_imports(path.read_text()) == []


def test_a_planted_underscore_import_is_found():
    text = "from ._opdecl import Launch, _shown\nfrom .. import _core\nfrom .._opphase import Value as _V\n"
    assert private_imports(text) == [(1, "._opdecl", "_shown")]
    assert private_imports("from .._opphase import _Value\n") == [(1, ".._opphase", "_Value")]
