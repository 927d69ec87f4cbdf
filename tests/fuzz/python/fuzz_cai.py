"""fuzz_cai.py — atheris target: jitbridge.as_array on objects exporting fuzzed __cuda_array_interface__ dicts
(every field at its limits and of every wrong type; producers whose property raises, returns a fresh dict or a
non-dict; fields whose __index__/__bool__, and dict keys whose __eq__, raise or change the dict being read).
Each outcome is checked against reference.judge_cai; accepted views must also read back through their exports."""
import sys

import fuzz_common as fc
from fuzz_common import finding
import hostile
from hostile import CAI_KEYS, ProducerError, apply_action, build, hostile_key, states_between
import jitbridge
import reference as ref
import view_facts

TYPESTRS = ["<f4", "<f8", "<f2", "|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<c8", "<c16",
            "<V2", ">f4", "=f4", "|f8", ">i1", "<f", "<V4", "<q4", "f4", "", "<f4\x00", "<f\ud800"]

ACTIONS = [("clear_dict",), ("del_key", "shape"), ("del_key", "data"), ("del_key", "strides"),
           ("set_key", "shape", ("tuple", [("int", 2**40), ("int", 2**40)])),
           ("set_key", "data", ("tuple", [("int", 0), ("bool", False)])), ("set_key", "typestr", ("str", "<f8")),
           ("set_key", "strides", ("none",)), ("set_key", "mask", ("object",)), ("list_clear", "shape"),
           ("list_append", "shape", ("int", 3)), ("list_set", "shape", ("int", 2**40)), ("list_clear", "strides"),
           ("list_set", "strides", ("int", -2**62)), ("gc",)]


def make(fdp):
    """(fields: key -> spec, hostile keys: [(name, action)], producer kind, stream= spec)."""
    fields = {}
    allow_bad = fdp.ConsumeIntInRange(0, 3) == 0
    if fdp.ConsumeIntInRange(0, 15):
        fields["version"] = fc.int_spec(fdp, fdp.PickValueInList([3, 3, 3, 2, 1, 0, 4, -1, 2**63]),
                                        allow_bad=allow_bad, actions=ACTIONS)
    if fdp.ConsumeIntInRange(0, 15):
        if fdp.ConsumeIntInRange(0, 7):
            fields["typestr"] = ("str", fdp.PickValueInList(TYPESTRS))
        else:
            fields["typestr"] = fdp.PickValueInList([("str", fdp.ConsumeUnicode(4)), ("bytes", b"<f4"), ("none",),
                                                     ("int", 4)])
    ndim = fdp.ConsumeIntInRange(0, 4) if fdp.ConsumeIntInRange(0, 31) else fdp.PickValueInList([9, 64, 65])
    dims = [fdp.ConsumeIntInRange(0, 9) if fdp.ConsumeIntInRange(0, 7) else fc.edgy_int(fdp) for _ in range(ndim)]
    if fdp.ConsumeIntInRange(0, 15):
        fields["shape"] = fc.seq_spec(fdp, dims, allow_bad=allow_bad, actions=ACTIONS)
    if fdp.ConsumeIntInRange(0, 15):
        ptr = fdp.PickValueInList([0x7F0000001000, 0x7F0000001000, 0x10, 0]) if fdp.ConsumeBool() else fc.edgy_int(fdp)
        ro = fdp.PickValueInList([("bool", False), ("bool", True), ("int", 0), ("int", 1), ("none",), ("raises",),
                                  ("truth", True, None), ("truth", False, None)])
        if ro[0] == "truth" and fdp.ConsumeBool():
            ro = (ro[0], ro[1], fdp.PickValueInList(ACTIONS))
        pointer = fc.int_spec(fdp, ptr, allow_bad=allow_bad, actions=ACTIONS)
        shape_of = fdp.ConsumeIntInRange(0, 15)
        if shape_of == 0:
            fields["data"] = ("none",)
        elif shape_of == 1:
            fields["data"] = ("list", [pointer, ro])
        elif shape_of == 2:
            fields["data"] = ("tuple", [pointer])
        else:
            fields["data"] = ("tuple", [pointer, ro])
    r = fdp.ConsumeIntInRange(0, 7)
    if r < 3:
        item = fdp.PickValueInList([1, 2, 4, 8, 16, 3])
        n = ndim if fdp.ConsumeIntInRange(0, 15) else fdp.ConsumeIntInRange(0, 5)
        strides = [item * (fdp.ConsumeIntInRange(-9, 9) if fdp.ConsumeIntInRange(0, 7) else fc.edgy_int(fdp))
                   for _ in range(n)]
        fields["strides"] = fc.seq_spec(fdp, strides, allow_bad=allow_bad, actions=ACTIONS)
    elif r == 3:
        fields["strides"] = ("none",)
    r = fdp.ConsumeIntInRange(0, 31)
    if r == 0:
        fields["mask"] = ("object",)
    elif r == 1:
        fields["mask"] = ("none",)
    r = fdp.ConsumeIntInRange(0, 7)
    if r < 2:
        fields["stream"] = fc.int_spec(fdp, fdp.PickValueInList([1, 2, 0, -1, 0x1234, 2**63, 2**64]),
                                       allow_bad=allow_bad, actions=ACTIONS)
    elif r == 2:
        fields["stream"] = ("none",)
    keys = []
    if fdp.ConsumeIntInRange(0, 15) == 0:
        keys.append((fdp.PickValueInList(list(CAI_KEYS)), fdp.PickValueInList(ACTIONS)))
    producer = fdp.PickValueInList(["property"] * 6 + ["fresh"] * 3 + ["raises", "not_dict", "dict_subclass",
                                                                      "instance"])
    stream_arg = ("none",) if fdp.ConsumeIntInRange(0, 7) else fdp.PickValueInList(
        [("int", 1), ("int", 2), ("int", 0x1234), ("int", -1), ("int", 2**64), ("bool", True), ("str", "1")])
    return fields, keys, producer, stream_arg


def single_action(fields, keys):
    """Keeps one hostile action in the whole input; returns (fields, keys, the action or None)."""
    wrapped = fc.one_action_only(("tuple", [fields.get(k, ("none",)) for k in CAI_KEYS]))
    fields = {k: v for k, v in zip(CAI_KEYS, wrapped[1]) if k in fields}
    action = None

    def find(s):
        nonlocal action
        if isinstance(s, tuple) and s and s[0] in ("index", "truth", "floatlike") and s[2] is not None:
            action = action or s[2]
        elif isinstance(s, tuple) and s and s[0] in ("tuple", "tuplesub", "list", "listsub", "iter"):
            for x in s[1]:
                find(x)
    for s in fields.values():
        find(s)
    if action is not None or not keys:
        return fields, [], action
    return fields, keys[:1], keys[0][1]


def materialize(fields, keys, ctx):
    d = hostile.DictSub() if ctx.kind == "dict_subclass" else {}
    for name, action in keys:  # before the real keys: lookups of `name` compare against it first
        d[hostile_key(name, ctx, action)] = 0
    for k, spec in fields.items():
        d[k] = build(spec, ctx, name=k)
    ctx.dict = d
    return d


class Raising:
    @property
    def __cuda_array_interface__(self):
        raise ProducerError("property")


class NotDict:
    __cuda_array_interface__ = [("shape", (2,))]


class Fresh:
    """A new dict at every access: the reader holds the only reference to it and its values."""

    def __init__(self, fields, keys, ctx):
        self.args = (fields, keys, ctx)

    @property
    def __cuda_array_interface__(self):
        return materialize(*self.args)


class Held:
    def __init__(self, d):
        self.d = d

    @property
    def __cuda_array_interface__(self):
        return self.d


class Plain:
    """No protocol on the type: the dict sits in the instance's __dict__."""


# Producer classes are made once: jitbridge keeps an adapter (and a reference) per type for good.
def producer_object(fields, keys, ctx):
    kind = ctx.kind
    if kind == "raises":
        return Raising()
    if kind == "not_dict":
        return NotDict()
    if kind == "fresh":
        return Fresh(fields, keys, ctx)
    d = materialize(fields, keys, ctx)
    if kind == "instance":
        o = Plain()
        o.__cuda_array_interface__ = d
        return o
    return Held(d)


def test_one(data):
    fdp = fc.atheris.FuzzedDataProvider(data)
    fields, keys, kind, stream_arg = make(fdp)
    fields, keys, action = single_action(fields, keys)
    ctx = hostile.Context()
    ctx.kind = kind
    obj = producer_object(fields, keys, ctx)
    context = f"as_array(CAI {fields!r}, hostile keys {keys!r}, producer {kind}, stream={stream_arg!r})"

    outcomes = []
    if kind in ("raises", "not_dict"):
        outcomes.append(ref.Refuse(f"producer {kind}"))
    else:
        after = apply_action(fields, action)
        for st in states_between(fields, after):
            for index_ok in (True, False):
                outcomes.append(ref.judge_cai(st, index_ok))
    try:
        consumer = ref.judge_stream_arg(stream_arg)
    except ref.Invalid as e:
        outcomes = [ref.Refuse(f"stream=: {e}")]
        consumer = None
    for o in outcomes:
        if isinstance(o, ref.Accept) and stream_arg[0] != "none" and consumer not in (0,):
            o.facts["stream"] = consumer
        elif isinstance(o, ref.Accept) and stream_arg[0] == "none":
            o.facts["stream"] = 1
    stream_obj = build(stream_arg, ctx)
    v = fc.check(lambda: jitbridge.as_array(obj, stream=stream_obj), outcomes, context, view_facts.differences,
                 producer_may_raise=True)
    if v is not None:
        view_facts.round_trips(v, context)


if __name__ == "__main__":
    fc.run(test_one, sys.argv)
