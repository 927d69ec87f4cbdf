"""_opexpr.py — declaration rules as expressions the native runner evaluates in C++ (torch_native/expr.hpp): sizes,
element counts, scalar inputs and constants combined with + - * //, cdiv, minimum, maximum. A rule written as a
lambda is traced once with stand-in tensors; one that does anything else (a comparison, a branch, a method other
than numel/size/shape) stays a Python callable, run by the Python runner."""

import numbers


class NotExpressible(Exception):
    """A rule that is no expression: the reason, for op.runner."""


class Expr:
    """An expression: ``tokens`` is its postfix program (expr.hpp's text form), e.g. ('n0', 'i1023', '+',
    'i1024', '/'). ``boolean``: a bool scalar input, launched as a bool."""

    __slots__ = ("tokens", "boolean")

    def __init__(self, tokens, boolean=False):
        self.tokens, self.boolean = tuple(tokens), boolean

    def _bin(self, other, op, reverse=False):
        o = as_expr(other)
        return Expr(o.tokens + self.tokens + (op,) if reverse else self.tokens + o.tokens + (op,))

    def __add__(self, o): return self._bin(o, "+")
    def __radd__(self, o): return self._bin(o, "+", True)
    def __sub__(self, o): return self._bin(o, "-")
    def __rsub__(self, o): return self._bin(o, "-", True)
    def __mul__(self, o): return self._bin(o, "*")
    def __rmul__(self, o): return self._bin(o, "*", True)
    def __floordiv__(self, o): return self._bin(o, "/")
    def __rfloordiv__(self, o): return self._bin(o, "/", True)
    def __neg__(self): return Expr(("i0",) + self.tokens + ("-",))

    def __truediv__(self, o):
        raise NotExpressible("true division (/) of a size: use // or cdiv()")
    __rtruediv__ = __truediv__

    def _refuse(self, *args):
        raise NotExpressible("a comparison, branch or conversion of a size (use minimum/maximum/cdiv from "
                             "jitbridge.torch)")
    __bool__ = __index__ = __int__ = __float__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _refuse
    __mod__ = __rmod__ = __pow__ = __rpow__ = _refuse
    __hash__ = None

    def __repr__(self):
        return f"Expr({' '.join(self.tokens)})"


def as_expr(value):
    """An Expr for an Expr, an int, a bool or a float; NotExpressible for anything else."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Expr((f"i{int(value)}",))
    if isinstance(value, numbers.Integral):
        return Expr((f"i{int(value)}",))
    if isinstance(value, numbers.Real):
        return Expr((f"f{float(value)!r}",))
    raise NotExpressible(f"a value of type {type(value).__name__}")


def cdiv(a, b):
    """Ceiling division ``-(-a // b)``: ints give an int, expressions an expression (evaluated in C++)."""
    if isinstance(a, Expr) or isinstance(b, Expr):
        return Expr(as_expr(a).tokens + as_expr(b).tokens + ("c",))
    return -(-a // b)


def minimum(a, b):
    """min(a, b) for ints and expressions (builtin min() cannot take an expression: it compares)."""
    if isinstance(a, Expr) or isinstance(b, Expr):
        return Expr(as_expr(a).tokens + as_expr(b).tokens + ("m",))
    return min(a, b)


def maximum(a, b):
    """max(a, b) for ints and expressions."""
    if isinstance(a, Expr) or isinstance(b, Expr):
        return Expr(as_expr(a).tokens + as_expr(b).tokens + ("M",))
    return max(a, b)


class ShapeProxy:
    """``x.shape`` while tracing: indexable by an int; returned whole, an output shape copies x's."""

    __slots__ = ("slot",)

    def __init__(self, slot):
        self.slot = slot

    def __getitem__(self, dim):
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise NotExpressible("x.shape indexed by something other than an int (slices, tuples)")
        return Expr((f"s{self.slot}:{dim}",))

    def _refuse(self, *args):
        raise NotExpressible("x.shape used as a sequence (len, iteration, concatenation)")
    __len__ = __iter__ = __add__ = __radd__ = __eq__ = _refuse
    __hash__ = None


class TensorProxy:
    """A tensor while tracing a rule: numel(), size(d), shape[d] and shape."""

    __slots__ = ("slot", "name")

    def __init__(self, slot, name):
        self.slot, self.name = slot, name

    @property
    def shape(self):
        return ShapeProxy(self.slot)

    def numel(self):
        return Expr((f"n{self.slot}",))

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def __getattr__(self, attr):
        raise NotExpressible(f"{self.name}.{attr} (rules that run in C++ read only numel(), size(), shape)")

    def _refuse(self, *args):
        raise NotExpressible(f"{self.name} used as a value (rules that run in C++ read only its sizes)")
    __bool__ = __add__ = __radd__ = __mul__ = __rmul__ = __len__ = __iter__ = _refuse
