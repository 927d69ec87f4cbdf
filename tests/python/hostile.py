"""hostile.py — what the hostile-input test files share: exception checks that want the argument named, the DLPack
deleter count, and an int-like whose __index__ can act on what is being read."""
import gc
import re

import pytest
from testing_hooks import hooks


I64_MAX = 2 ** 63 - 1


def deletes():
    gc.collect()
    return hooks.deleter_count()


def refused(exc, *names):
    """pytest.raises(exc) whose message must name each of `names` (literal text)."""
    return pytest.raises(exc, match=".*".join(re.escape(n) for n in names))


class Index:
    """An int-like whose __index__ runs `action` first (once), then returns `value`."""

    def __init__(self, value, action=None):
        self.value, self.action = value, action

    def __index__(self):
        action, self.action = self.action, None
        if action:
            action()
        return self.value
