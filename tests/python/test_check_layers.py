"""scripts/check-layers, the layer rules of docs/DESIGN.md ("Layers"): the tree passes, and a planted forbidden
include (or an embedded device header of a layer above, a header in two layers, or a public header without the source
of its name) fails naming the file, the line and the rule."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-layers"
LAYERS = ("cuda", "jit", "interop", "launch")


def run(root):
    out = subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True,
                         timeout=60)
    return out.returncode, out.stdout


def test_the_tree_keeps_every_rule():
    rc, out = run(ROOT)
    assert (rc, out.strip()) == (0, "check-layers: every layer rule holds")


@pytest.fixture
def tree(tmp_path):
    """A copy of the four layers' folders (sources and headers), to plant violations in."""
    for layer in LAYERS:
        shutil.copytree(ROOT / layer, tmp_path / layer)
    return tmp_path


@pytest.mark.parametrize("layer, header, owner", [
    ("jit", "array.hpp", "interop"),        # jit/ and interop/ never include each other
    ("interop", "jit.hpp", "jit"),
    ("cuda", "module.hpp", "launch"),       # the base includes nothing above it
    ("jit", "launcher.hpp", "launch"),
])
def test_a_planted_forbidden_include_fails_naming_file_line_and_rule(tree, layer, header, owner):
    victim = sorted((tree / layer / "src").glob("*.cpp"))[0]
    lines = victim.read_text().splitlines()
    lines.insert(3, f'#include "jitbridge/{header}"')
    victim.write_text("\n".join(lines) + "\n")
    rc, out = run(tree)
    assert rc == 1
    where = f"{layer}/src/{victim.name}:4"
    assert f"check-layers: {where}: includes jitbridge/{header} from {owner}/; {layer}/ may include only" in out
    assert "1 violation(s)" in out


def test_a_device_header_jit_embeds_must_be_jits(tree):
    # jit/src/device_headers.cpp.in embeds jitbridge/tensor.cuh (CMake reads jit/include/jitbridge/tensor.cuh into
    # it): moved up to launch/, where it once was, jit/ would embed a header of the layer above it.
    table = tree / "jit" / "src" / "device_headers.cpp.in"
    line = next(n for n, text in enumerate(table.read_text().splitlines(), 1) if '{"jitbridge/tensor.cuh", R"' in text)
    header = tree / "jit" / "include" / "jitbridge" / "tensor.cuh"
    header.rename(tree / "launch" / "include" / "jitbridge" / "tensor.cuh")
    rc, out = run(tree)
    assert rc == 1
    assert (f"check-layers: jit/src/device_headers.cpp.in:{line}: embeds jitbridge/tensor.cuh from launch/; jit/ may "
            "include only cuda/, jit/ (docs/DESIGN.md, Layers)") in out
    assert "1 violation(s)" in out


def test_a_header_in_two_layers_and_an_unknown_header_fail(tree):
    shutil.copy(tree / "cuda" / "include" / "jitbridge" / "driver.hpp", tree / "jit" / "include" / "jitbridge")
    (tree / "launch" / "src" / "planted.cpp").write_text('#include "jitbridge/nowhere.hpp"\n')
    rc, out = run(tree)
    assert rc == 1
    assert "jitbridge/driver.hpp is in cuda and jit: a header lives in one layer" in out
    assert "launch/src/planted.cpp:1: includes jitbridge/nowhere.hpp, which no layer's include/jitbridge has" in out


@pytest.mark.parametrize("layer, renamed", [
    ("jit", ("link.cpp", "linker.cpp")),            # the name issue 25 found apart: link.hpp / linker.cpp
    ("interop", ("dtype.cpp", "dtypes.cpp")),
])
def test_a_public_header_without_its_source_fails(tree, layer, renamed):
    old, new = renamed
    (tree / layer / "src" / old).rename(tree / layer / "src" / new)
    (tree / "launch" / "include" / "jitbridge" / "orphan.hpp").write_text("#pragma once\n")
    rc, out = run(tree)
    assert rc == 1
    header = old.replace(".cpp", ".hpp")
    assert (f"check-layers: {layer}/include/jitbridge/{header} has no {layer}/src/{old}: a public header is named "
            "after the source that implements it") in out
    assert "launch/include/jitbridge/orphan.hpp has no launch/src/orphan.cpp" in out
    assert "2 violation(s)" in out
