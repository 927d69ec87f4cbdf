"""The code docs/TORCH.md shows runs as shown: its 15-line quickstart (declare an op, run forward and backward,
compare with the formula), executed on the GPU."""
import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu]
pytest.importorskip("torch")

TORCH_MD = Path(__file__).resolve().parents[2] / "docs" / "TORCH.md"


def quickstart_source():
    text = TORCH_MD.read_text()
    section = text[text.index("## Quickstart"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_torch_md_quickstart_runs(gpu):
    code = quickstart_source()
    assert len(code.strip().splitlines()) <= 16 and "custom_op(" in code
    namespace = {}
    exec(compile(code, str(TORCH_MD) + ":quickstart", "exec"), namespace)   # asserts x.grad == 2 x itself
    x = namespace["x"]
    assert x.grad is not None and bool((x.grad == 2 * x.detach()).all())
