"""hostile.py — the values the Python fuzz targets pass: plain specs (tuples the reference judges) made into
objects, some of them hostile: their __index__, __bool__, __float__, __str__ or __eq__ raise, or change the
very dict or list being read (once), to catch readers that hold borrowed references across Python code."""
import copy
import gc


class ProducerError(Exception):
    """What a hostile dunder raises: the caller's own exception, which jitbridge may pass on or wrap."""


class IntSub(int):
    pass


class TupleSub(tuple):
    pass


class ListSub(list):
    pass


class DictSub(dict):
    pass


class Context:
    """What actions act on: the dict being read (CAI), named lists (shape, strides, args)."""

    def __init__(self):
        self.dict = None
        self.lists = {}
        self.fired = []

    def run(self, action):
        if action is None:
            return
        self.fired.append(action)
        kind = action[0]
        if kind == "clear_dict" and self.dict is not None:
            self.dict.clear()
        elif kind == "del_key" and self.dict is not None:
            self.dict.pop(action[1], None)
        elif kind == "set_key" and self.dict is not None:
            self.dict[action[1]] = build(action[2], self)
        elif kind == "list_clear" and action[1] in self.lists:
            self.lists[action[1]].clear()
        elif kind == "list_append" and action[1] in self.lists:
            self.lists[action[1]].append(build(action[2], self))
        elif kind == "list_set" and action[1] in self.lists and self.lists[action[1]]:
            self.lists[action[1]][-1] = build(action[2], self)
        gc.collect(0)


class Index:
    """An object with __index__ (a NumPy integer's role) that runs its action the first time."""

    def __init__(self, value, fire):
        self.value, self.fire = value, fire

    def __index__(self):
        self.fire()
        return self.value


class Truth:
    """An object whose __bool__ runs its action the first time."""

    def __init__(self, value, fire):
        self.value, self.fire = value, fire

    def __bool__(self):
        self.fire()
        return self.value


class FloatLike:
    """An object with __float__ only, running its action the first time."""

    def __init__(self, value, fire):
        self.value, self.fire = value, fire

    def __float__(self):
        self.fire()
        return self.value


class Raises:
    """Every conversion raises the producer's own error."""

    def __index__(self):
        raise ProducerError("__index__")

    def __bool__(self):
        raise ProducerError("__bool__")

    def __float__(self):
        raise ProducerError("__float__")

    def __str__(self):
        raise ProducerError("__str__")

    def __len__(self):
        raise ProducerError("__len__")


def _once(ctx, action):
    """A callable running `action` the first time only."""
    state = {"done": False}

    def fire():
        if not state["done"]:
            state["done"] = True
            ctx.run(action)
    return fire


def build(spec, ctx, name=None):
    """The object a spec stands for. `name` registers a list under that name for list actions."""
    kind = spec[0]
    if kind == "int":
        return spec[1]
    if kind == "intsub":
        return IntSub(spec[1])
    if kind == "bool":
        return spec[1]
    if kind == "float":
        return spec[1]
    if kind == "str":
        return spec[1]
    if kind == "bytes":
        return spec[1]
    if kind == "none":
        return None
    if kind == "object":
        return object()
    if kind == "nd0":  # a 0-d NumPy array: __index__ for an int, none for a float (its __index__ raises)
        import numpy
        return numpy.array(spec[1])
    if kind == "index":
        return Index(spec[1], _once(ctx, spec[2]))
    if kind == "truth":
        return Truth(spec[1], _once(ctx, spec[2]))
    if kind == "floatlike":
        return FloatLike(spec[1], _once(ctx, spec[2]))
    if kind == "raises":
        return Raises()
    if kind in ("tuple", "tuplesub", "list", "listsub", "iter"):
        items = [build(s, ctx) for s in spec[1]]
        if kind == "tuple":
            return tuple(items)
        if kind == "tuplesub":
            return TupleSub(items)
        if kind == "iter":
            return iter(items)
        out = list(items) if kind == "list" else ListSub(items)
        if name is not None:
            ctx.lists[name] = out
        return out
    raise AssertionError(f"unknown spec {spec!r}")


class HostileKey:
    """A dict key that hashes like `name` but never equals it; comparing against it runs the action (once)."""

    def __init__(self, name, fire):
        self.name, self.fire = name, fire

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        self.fire()
        return False

    def __repr__(self):
        return f"<hostile key {self.name}>"


def hostile_key(name, ctx, action):
    return HostileKey(name, _once(ctx, action))


def apply_action(state, action):
    """The spec-level effect of `action` on `state` (a dict of field -> spec; lists are ('list', items))."""
    state = copy.deepcopy(state)
    if action is None:
        return state
    kind = action[0]
    if kind == "clear_dict":
        for k in list(state):
            if k in CAI_KEYS:
                del state[k]
    elif kind == "del_key":
        state.pop(action[1], None)
    elif kind == "set_key":
        state[action[1]] = action[2]
    elif kind in ("list_clear", "list_append", "list_set"):
        v = state.get(action[1])
        if v is not None and v[0] in ("list", "listsub"):
            items = list(v[1])
            if kind == "list_clear":
                items = []
            elif kind == "list_append":
                items.append(action[2])
            elif items:
                items[-1] = action[2]
            state[action[1]] = (v[0], items)
    return state


CAI_KEYS = ("version", "shape", "typestr", "data", "strides", "mask", "stream")


def states_between(before, after):
    """Every state a reader may have seen: each field whose spec the action changed taken from before or after."""
    changed = [k for k in set(before) | set(after) if before.get(k, "absent") != after.get(k, "absent")]
    out = []
    for mask in range(1 << min(len(changed), 8)):
        s = dict(before)
        for i, k in enumerate(changed[:8]):
            if mask >> i & 1:
                if k in after:
                    s[k] = after[k]
                else:
                    s.pop(k, None)
        out.append(s)
    return out
