"""_opexpr.py — declaration rules as expressions the native runner evaluates in C++ (torch_native/expr.hpp): sizes,
ranks, element counts, scalar inputs and constants combined with + - * //, cdiv, minimum, maximum, comparisons,
& |, where; and Check, an input check written the same way. A rule written as a
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

    # comparisons and & | give expressions (1 or 0); using one as a Python bool (if, and, or, min, max) cannot be
    # traced: that rule stays Python
    def __lt__(self, o): return self._bin(o, "<")
    def __le__(self, o): return self._bin(o, "<=")
    def __gt__(self, o): return self._bin(o, ">")
    def __ge__(self, o): return self._bin(o, ">=")
    def __eq__(self, o): return self._bin(o, "==")
    def __ne__(self, o): return self._bin(o, "!=")
    def __and__(self, o): return self._bin(o, "&")
    def __rand__(self, o): return self._bin(o, "&", True)
    def __or__(self, o): return self._bin(o, "|")
    def __ror__(self, o): return self._bin(o, "|", True)

    def _refuse(self, *args):
        raise NotExpressible("a branch or conversion of a size: if/and/or/min()/max() need a Python bool (use "
                             "minimum, maximum, cdiv, where and & | from jitbridge.torch)")
    __bool__ = __index__ = __int__ = __float__ = _refuse
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


def where(condition, a, b):
    """``a if condition else b`` for ints and expressions (a Python conditional cannot take an expression)."""
    if any(isinstance(v, Expr) for v in (condition, a, b)):
        return Expr(as_expr(condition).tokens + as_expr(a).tokens + as_expr(b).tokens + ("?",))
    return a if condition else b


class Check:
    """A declared input check that also runs in C++: ``Check(lambda x, bias: (bias.dim() == 1) & (x.shape[-1] ==
    bias.shape[0]), "bias must have shape [C] for x of shape [..., C]")``. The condition reads sizes, ranks and
    scalars with + - * // == != < <= > >= & | (not and/or/if); when it is false (or reads a dimension a tensor does
    not have) the op raises ValueError with the message and the shapes of the tensors it names. check= takes one
    Check or a tuple of them (checked in order)."""

    __slots__ = {"condition": "the callable given: it takes the names it checks (inputs, scalars) as parameters",
                 "message": "the ValueError's text (blanks collapsed)",
                 "names": "the condition's parameter names, in order"}

    def __init__(self, condition, message):
        """A check of ``condition`` (a callable of input names) that raises ValueError(``message``) when false.
        Raises TypeError for a condition that is not callable or an empty message."""
        import inspect
        if not callable(condition):
            raise TypeError(f"Check: the condition must be a callable, got {type(condition).__name__}")
        if not isinstance(message, str) or not message:
            raise TypeError("Check: the message must be a non-empty str")
        self.condition, self.message = condition, " ".join(message.split())
        self.names = tuple(inspect.signature(condition).parameters)

    def _holds(self, values):
        try:
            return bool(self.condition(**{n: values[n] for n in self.names}))
        except IndexError:
            return False

    def _error(self, values):
        shown = ", ".join(f"{n} {list(values[n].shape)}" for n in self.names if hasattr(values[n], "shape"))
        return ValueError(f"{self.message}; got {shown}")

    def __repr__(self):
        return f"Check({self.message!r})"


class Checks:
    """check= given as Check objects: callable as the Python runner calls a check (the names it asks for by
    keyword), raising the first failed Check's ValueError."""

    __slots__ = ("checks", "_jitbridge_names")

    def __init__(self, checks):
        self.checks = tuple(checks)
        names = []
        for c in self.checks:
            names += [n for n in c.names if n not in names]
        self._jitbridge_names = tuple(names)

    def __call__(self, **values):
        for c in self.checks:
            if not c._holds(values):
                raise c._error(values)


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

    def dim(self):
        return Expr((f"r{self.slot}",))

    @property
    def ndim(self):
        return self.dim()

    def __getattr__(self, attr):
        raise NotExpressible(f"{self.name}.{attr} (rules that run in C++ read only numel(), size(), shape)")

    def _refuse(self, *args):
        raise NotExpressible(f"{self.name} used as a value (rules that run in C++ read only its sizes)")
    __bool__ = __add__ = __radd__ = __mul__ = __rmul__ = __len__ = __iter__ = _refuse
