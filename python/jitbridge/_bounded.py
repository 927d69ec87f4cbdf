"""_bounded.py — keeps a wrong call of a compiled function from echoing its arguments: pybind11's TypeError for a call
that matches no signature ends in "Invoked with: " and the repr of every argument, a 1 MB source included."""

import functools

__all__ = ["bounded", "bound_methods"]

_INVOKED = "\n\nInvoked with: "
_MAX_HEAD = 1200   # the supported signatures pybind11 lists
_MAX_ARGS = 8


def _described(value):
    try:
        size = f" of length {len(value)}" if isinstance(value, (str, bytes, bytearray, list, tuple, dict)) else ""
    except Exception:  # noqa: BLE001 - a hostile __len__ only loses the length
        size = ""
    return type(value).__name__ + size


def _shortened(message, args, kwargs):
    head, found, _ = message.partition(_INVOKED)
    if not found:
        return None
    if len(head) > _MAX_HEAD:
        head = head[:_MAX_HEAD] + " [...]"
    parts = [_described(a) for a in args] + [f"{k}={_described(v)}" for k, v in kwargs.items()]
    if len(parts) > _MAX_ARGS:
        parts = parts[:_MAX_ARGS] + [f"... {len(parts) - _MAX_ARGS} more"]
    return f"{head}{_INVOKED}({', '.join(parts)}) [argument types only]"


def bounded(fn):
    """``fn`` (a pybind11 function or method) behind a Python function that re-raises pybind11's no-matching-signature
    TypeError with the argument types in place of their values; every other outcome is fn's own."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            short = _shortened(str(e), args, kwargs)
            if short is None:
                raise
            raise TypeError(short) from None

    return call


def bound_methods(cls, names):
    """Replaces the methods ``names`` of the pybind11 class ``cls`` with bounded() ones."""
    for name in names:
        setattr(cls, name, bounded(cls.__dict__[name]))
