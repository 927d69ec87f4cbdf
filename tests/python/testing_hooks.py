"""The test-only extension jitbridge_testing (python/testing/), as `hooks`, for the tests that need its hooks.

`hooks.capsule(...)`, `hooks.adapter_protocol(cls)`, ... import jitbridge_testing at their first use. When it was not
built (JITBRIDGE_BUILD_TESTS=OFF, or an installed wheel tested without a build tree: conftest.py puts
<build>/python_testing on sys.path), the test that asked is skipped with the reason; the others run. A
jitbridge_testing that does not match the imported jitbridge fails the test with its own error (never a skip).
"""

import importlib

import pytest

MODULE = "jitbridge_testing"


class _Hooks:
    """Attribute access is forwarded to jitbridge_testing, imported on first use; a test skips if it is absent."""

    def __init__(self):
        self._module = None

    def module(self):
        """jitbridge_testing, or pytest.skip() with the reason it cannot be imported."""
        if self._module is None:
            try:
                self._module = importlib.import_module(MODULE)
            except ModuleNotFoundError as e:
                if e.name != MODULE:
                    raise
                pytest.skip(f"the test-only module {MODULE} is not built (configure with JITBRIDGE_BUILD_TESTS=ON "
                            "and set JITBRIDGE_BUILD_DIR to that build tree)")
        return self._module

    def optional(self):
        """jitbridge_testing, or None when it is not built (for a check that is a side point of a larger test)."""
        try:
            return self.module()
        except pytest.skip.Exception:
            return None

    def __getattr__(self, name):
        if name.startswith("_"):  # pytest's collection probes names such as __test__ and _pytestfixturefunction
            raise AttributeError(name)
        return getattr(self.module(), name)


hooks = _Hooks()
