"""fuzz_from_ptr.py — atheris target: jitbridge.from_ptr(ptr, shape, dtype, device=, strides=, readonly=, stream=)
with fuzzed addresses, shapes and strides at the int64/uint64 limits, dtype names, NumPy dtypes, devices and streams;
shape and stride items whose __index__ raises or changes the list being read. Checked against
reference.judge_from_ptr; accepted views must read back through their exports."""
import sys

import numpy

import fuzz_common as fc
import hostile
from hostile import apply_action, build, states_between
import jitbridge
import reference as ref
import view_facts

DTYPE_NAMES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "uint64", "bool",
               "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "half", "float", "double", "bf16", "int",
               "torch.float32", "torch.bfloat16", "<f4", ">f4", "|b1", "f4", "i8", "V2", "c16", "<f3", "float33",
               "d", "f", "float_", "", "\ud800", "torch.", "=i2", ">i1"]
NP_DTYPES = [numpy.float32, numpy.dtype("float16"), numpy.dtype(">f4"), numpy.dtype("<u2"), numpy.longdouble,
             numpy.dtype("datetime64[s]"), numpy.dtype("U3"), numpy.bool_, numpy.dtype([("a", "<f4")]), numpy.int8]
_INFO = jitbridge.driver_info()
DRIVER_DEVICES = len(_INFO["devices"]) if _INFO["found"] else None   # from_ptr refuses ordinals beyond these
DEVICES = [("none",), ("int", 0), ("int", 1), ("int", 2**31), ("int", -1), ("str", "cuda:0"), ("str", "cuda"),
           ("str", "cpu"), ("str", "cuda:999999999"), ("str", "cuda:0000000001"), ("str", "cuda:-1"), ("str", "gpu"),
           ("tuple", [("int", 2), ("int", 0)]), ("tuple", [("int", 1), ("int", 0)]), ("tuple", [("int", 10), ("int", 0)]),
           ("tuple", [("int", 2), ("int", 2**31)]), ("bool", True), ("raises",), ("float", 0.0), ("str", "\ud800")]
ACTIONS = [("list_clear", "shape"), ("list_append", "shape", ("int", 5)), ("list_set", "shape", ("int", 2**40)),
           ("list_clear", "strides"), ("list_append", "strides", ("int", 1)), ("list_set", "strides", ("int", -2**62)),
           ("gc",)]


def make(fdp):
    st = {}
    allow_bad = fdp.ConsumeIntInRange(0, 3) == 0
    ptr = fdp.PickValueInList([0x7F0000001000, 0x10, 0, 2**64 - 16]) if fdp.ConsumeBool() else fc.edgy_int(fdp)
    st["ptr"] = fc.int_spec(fdp, ptr, allow_bad=allow_bad)
    ndim = fdp.ConsumeIntInRange(0, 4) if fdp.ConsumeIntInRange(0, 31) else fdp.PickValueInList([9, 64, 65])
    dims = [fdp.ConsumeIntInRange(0, 9) if fdp.ConsumeIntInRange(0, 7) else fc.edgy_int(fdp) for _ in range(ndim)]
    r = fdp.ConsumeIntInRange(0, 15)
    if r == 0 and dims:
        st["shape"] = fc.int_spec(fdp, dims[0], allow_bad=allow_bad)
    elif r == 1:
        st["shape"] = fdp.PickValueInList([("str", "12"), ("bytes", b"\x01"), ("none",), ("float", 2.0),
                                           ("bool", True), ("raises",)])
    else:
        st["shape"] = fc.seq_spec(fdp, dims, kinds=("tuple", "list", "listsub", "iter"), allow_bad=allow_bad,
                                  actions=ACTIONS)
    r = fdp.ConsumeIntInRange(0, 7)
    if r < 5:
        st["dtype"] = ("str", fdp.PickValueInList(DTYPE_NAMES))
    elif r == 5:
        st["dtype"] = ("np", fdp.PickValueInList(NP_DTYPES))
    elif r == 6:
        st["dtype"] = fdp.PickValueInList([("pytype", "bool"), ("pytype", "int"), ("pytype", "float"),
                                           ("pytype", "complex"), ("none",), ("object",)])
    else:
        st["dtype"] = ("str", fdp.ConsumeUnicode(6))
    st["device"] = fdp.PickValueInList(DEVICES) if fdp.ConsumeIntInRange(0, 3) else ("none",)
    if fdp.ConsumeBool():
        n = ndim if fdp.ConsumeIntInRange(0, 15) else fdp.ConsumeIntInRange(0, 5)
        strides = [fdp.ConsumeIntInRange(-9, 9) if fdp.ConsumeIntInRange(0, 7) else fc.edgy_int(fdp) for _ in range(n)]
        st["strides"] = fc.seq_spec(fdp, strides, kinds=("tuple", "list", "iter"), allow_bad=allow_bad, actions=ACTIONS)
    else:
        st["strides"] = ("none",)
    st["readonly"] = fdp.ConsumeBool()
    st["stream"] = ("none",) if fdp.ConsumeIntInRange(0, 7) else fdp.PickValueInList(
        [("int", 1), ("int", 2), ("int", 0x1234), ("int", -1), ("int", 2**64), ("bool", True), ("str", "1")])
    return st


def test_one(data):
    fdp = fc.atheris.FuzzedDataProvider(data)
    st = make(fdp)
    wrapped = fc.one_action_only(("tuple", [st["shape"], st["strides"]]))
    st["shape"], st["strides"] = wrapped[1]
    action = None
    for s in (st["shape"], st["strides"]):
        if s[0] in ("tuple", "list", "listsub", "iter"):
            for x in s[1]:
                if x[0] == "index" and x[2] is not None:
                    action = x[2]
    ctx = hostile.Context()
    args = dict(ptr=build(st["ptr"], ctx), shape=build(st["shape"], ctx, name="shape"), dtype=None,
                device=build(st["device"], ctx), strides=build(st["strides"], ctx, name="strides"),
                readonly=st["readonly"], stream=build(st["stream"], ctx))
    args["dtype"] = st["dtype"][1] if st["dtype"][0] in ("str", "np") else \
        {"pytype": lambda s: {"bool": bool, "int": int, "float": float, "complex": complex}[s[1]],
         "none": lambda s: None, "object": lambda s: object()}[st["dtype"][0]](st["dtype"])
    owner = [1]
    context = f"from_ptr({st!r})"
    outcomes = []
    after = apply_action({"shape": st["shape"], "strides": st["strides"]}, action)
    for lists in states_between({"shape": st["shape"], "strides": st["strides"]}, after):
        for index_ok in (True, False):
            outcomes.append(ref.judge_from_ptr(dict(st, **lists), index_ok, numpy, DRIVER_DEVICES))
    v = fc.check(lambda: jitbridge.from_ptr(args["ptr"], args["shape"], args["dtype"], device=args["device"],
                                             strides=args["strides"], owner=owner, readonly=args["readonly"],
                                             stream=args["stream"]),
                 outcomes, context, view_facts.differences, producer_may_raise=True)
    if v is not None:
        if v.obj is not owner:
            fc.finding("wrong-result", f"the view does not keep its owner | {context}")
        view_facts.round_trips(v, context)


if __name__ == "__main__":
    fc.run(test_one, sys.argv)
