"""_bounded.py — keeps a wrong call of a compiled function from echoing its arguments: pybind11's TypeError for a call
that matches no signature ends in "Invoked with: " and the repr of every argument, a 1 MB source included. The wrapper
also carries the function's Python signature (inspect.signature, help()) in place of pybind11's docstring line."""

import functools
import inspect

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


class _Shown:
    """An annotation or default as pybind11 wrote it: repr() gives the text (so help() shows `str`, not `'str'`)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _top_level_split(text):
    # At the commas outside brackets and quotes (a default can be "(1, 2)" or 'a, b').
    parts, depth, start, quote = [], 0, 0, None
    for i, c in enumerate(text):
        if quote:
            if c == quote and text[i - 1] != "\\":
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def _parameter(text, kind):
    if text.startswith("**"):
        return inspect.Parameter(text[2:].partition(":")[0].strip(), inspect.Parameter.VAR_KEYWORD)
    if text.startswith("*"):
        return inspect.Parameter(text[1:].partition(":")[0].strip(), inspect.Parameter.VAR_POSITIONAL)
    head, _, default = text.partition(" = ")
    name, _, annotation = head.partition(":")
    return inspect.Parameter(name.strip(), kind,
                             annotation=_Shown(annotation.strip()) if annotation else inspect.Parameter.empty,
                             default=_Shown(default.strip()) if default else inspect.Parameter.empty)


def split_signature(fn):
    """(inspect.Signature, the rest of the docstring) from the first line of a pybind11 function's docstring,
    ``name(a: int, *, b: str = 'x') -> Program``; (None, the docstring) when it has no such line."""
    doc = getattr(fn, "__doc__", None) or ""
    first, _, rest = doc.partition("\n")
    name = getattr(fn, "__name__", "")
    if not name or not first.startswith(name + "(") or ") -> " not in first:
        return None, doc
    params_text, _, returns = first[len(name) + 1:].rpartition(") -> ")
    try:
        params, kind = [], inspect.Parameter.POSITIONAL_OR_KEYWORD
        for part in _top_level_split(params_text):
            if part == "*":
                kind = inspect.Parameter.KEYWORD_ONLY
                continue
            if part == "/":
                params = [p.replace(kind=inspect.Parameter.POSITIONAL_ONLY) for p in params]
                continue
            param = _parameter(part, kind)
            if param.kind == inspect.Parameter.VAR_POSITIONAL:
                kind = inspect.Parameter.KEYWORD_ONLY
            elif param.name == "self" and not params:
                param = param.replace(annotation=inspect.Parameter.empty)  # pybind11 writes `self: object`
            params.append(param)
        signature = inspect.Signature(params, return_annotation=_Shown(returns.strip()))
    except ValueError:  # not a signature inspect can hold: keep pybind11's line
        return None, doc
    return signature, rest.lstrip("\n")


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

    signature, doc = split_signature(fn)
    if signature is not None:
        call.__signature__ = signature
        call.__doc__ = doc
    return call


def bound_methods(cls, names):
    """Replaces the methods ``names`` of the pybind11 class ``cls`` with bounded() ones."""
    for name in names:
        setattr(cls, name, bounded(cls.__dict__[name]))
