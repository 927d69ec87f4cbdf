"""fuzz_launch.py — atheris target: RawKernel argument packing (jitbridge_testing.pack_args, the test-only module)
and launches (k(grid, block, args, ...), k[grid, block, stream, shared_mem](...)) against real signatures compiled by
NVRTC, on the fake GPU of tests/fuzz/fake_cuda (a recorded cuLaunchKernel). Fuzzed arguments: arrays (from_ptr views,
CAI objects whose property may change the argument list being read), ints and floats at the limits, NumPy scalars,
bools, None, bytes; fuzzed configurations: grid/block/cluster items of every type and size, shared_mem, stream, flags
whose __bool__ raises. Checked against reference_launch; an accepted launch must reach the driver exactly as
configured."""
import ctypes
import struct
import sys

import numpy

import fuzz_common as fc
from fuzz_common import finding
import hostile
from hostile import build
import jitbridge
import jitbridge_testing as testing  # the test-only extension (python/testing): pack_args
import reference as ref
import reference_launch as rl

SOURCE = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <jitbridge/tensor.cuh>
struct Params { double scale; int n; };
struct __align__(16) Big { float v[5]; };
extern "C" __global__ void k_ptr(const float* a, float* b, void* raw, const void* craw, char* c, const int* i,
                                 double* d, __half* h, __nv_bfloat16* bf, unsigned char* u, bool* flags) {}
extern "C" __global__ void k_int(int a, unsigned int b, long long c, unsigned long long d, short e,
                                 unsigned short f, char g, signed char h, unsigned char u, bool flag, long l,
                                 unsigned long ul) {}
extern "C" __global__ void k_float(float f, double d, __half h, __nv_bfloat16 b) {}
extern "C" __global__ void k_struct(Params p, char c, Big big, int n) {}
extern "C" __global__ void k_tensor(jitbridge::Tensor<const float, 2> in, jitbridge::Tensor<float, 1> out, int n) {}
extern "C" __global__ void k_none() {}
'''
NAMES = ["k_ptr", "k_int", "k_float", "k_struct", "k_tensor", "k_none"]
MODULE = jitbridge.RawModule(code=SOURCE, arch="sm_90")
KERNELS = {n: MODULE.get_function(n) for n in NAMES}
PARAMS = {n: list(k.signature.params) for n, k in KERNELS.items()}
FAKE = ctypes.CDLL("libcuda.so.1")  # the fake driver jitbridge loaded (LD_LIBRARY_PATH names it)


class Launch(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint64), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("cluster", ctypes.c_uint * 3), ("shared_mem", ctypes.c_uint), ("cooperative", ctypes.c_int),
                ("programmatic", ctypes.c_int), ("buffer_form", ctypes.c_int), ("pointer_form", ctypes.c_int),
                ("param_bytes", ctypes.c_size_t),
                ("params", ctypes.c_ubyte * 4096)]


def last_launch():
    out = Launch()
    FAKE.fake_cuda_last_launch(ctypes.byref(out))
    return out


DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int8", "uint8", "bool", "int64", "complex128"]
INTS = [0, 1, -1, 127, 128, 255, 256, -128, -129, 2**15, 2**16 - 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1,
        2**63, 2**64 - 1, 2**64, -2**63, -2**63 - 1]
DRIVER_DEVICES = len(jitbridge.driver_info()["devices"])
NP_INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]  # NumPy integers of every width
FLOATS = [0.0, -0.0, 1.5, 65504.0, 65504.5, 65520.0, 1e5, 3.4028234663852886e38, 3.5e38, 1e300, float("inf"),
          float("-inf"), float("nan"), 5.96e-8, 1e-45]


class CAIArg:
    """An array through __cuda_array_interface__ whose property may run an action (once): it may change the very
    argument list the launcher is reading."""

    def __init__(self, d, fire):
        self.d, self.fire = d, fire

    @property
    def __cuda_array_interface__(self):
        self.fire()
        return self.d


def array_spec(fdp, element):
    """('view' | 'cai', facts) of a small valid array; its dtype mostly the element's."""
    dtype = rl.ELEMENTS.get(element, "float32") if fdp.ConsumeIntInRange(0, 3) else fdp.PickValueInList(DTYPES)
    ndim = fdp.ConsumeIntInRange(0, 3)
    shape = [fdp.ConsumeIntInRange(0, 5) for _ in range(ndim)]
    strides, step = [], 1
    for s in reversed(shape):
        strides.insert(0, step)
        step *= max(s, 1)
    # cuda:1 only where the driver has it (from_ptr refuses devices the driver does not see)
    device = fdp.PickValueInList([(2, 0)] * 6 + [(13, 0), (1, 0), (2, 1) if DRIVER_DEVICES > 1 else (2, 0)])
    facts = dict(ptr=0x7F0000001000 + 256 * fdp.ConsumeIntInRange(0, 255), dtype=dtype, device_type=device[0],
                 device_id=device[1], readonly=fdp.ConsumeIntInRange(0, 3) == 0, shape=shape, strides=strides)
    return (fdp.PickValueInList(["view", "view", "cai"]), facts)


def value_spec(fdp, param):
    s = param.spelling
    r = fdp.ConsumeIntInRange(0, 15)
    if s.strip().endswith("*") or s.startswith("jitbridge::Tensor"):
        if r < 11:
            element = rl._pointee(s)[0] if s.strip().endswith("*") else s[18:s.rindex(",")].replace("const", "").strip()
            spec = array_spec(fdp, element)
            if s.startswith("jitbridge::Tensor") and fdp.ConsumeBool():
                rank = int(s[s.rindex(",") + 1:-1])
                spec[1]["shape"] = [fdp.ConsumeIntInRange(0, 4) for _ in range(rank)]
                spec[1]["strides"] = [fdp.ConsumeIntInRange(-4, 4) for _ in range(rank)]
            return spec
        if r < 13:
            return ("none",)
    if r < 12:
        rl_kind = rl.SCALARS.get(s, ("struct", param.size))[0]
        if rl_kind in ("sint", "uint"):
            v = fdp.PickValueInList(INTS) if fdp.ConsumeBool() else fdp.ConsumeIntInRange(-300, 300)
            np_type = fdp.PickValueInList(NP_INTS)
            info = numpy.iinfo(np_type)
            return fdp.PickValueInList([("int", v), ("int", v), ("intsub", v), ("index", v, None),
                                        ("npint", np_type, v if info.min <= v <= info.max else 0)])
        if rl_kind == "bool":
            return fdp.PickValueInList([("bool", True), ("bool", False), ("npbool", True), ("int", 1)])
        if rl_kind in ("f32", "f64", "f16", "bf16"):
            x = fdp.PickValueInList(FLOATS) if fdp.ConsumeBool() else fdp.ConsumeRegularFloat()
            return fdp.PickValueInList([("float", x), ("float", x), ("floatlike", x, None), ("int", int(x) if
                                        abs(x) < 2**63 else 1), ("npfloat", "float64", x), ("npfloat", "float32",
                                        x if abs(x) < 3e38 or x != x else 1.0), ("npfloat", "float16",
                                        x if abs(x) < 60000 or x != x else 1.0)])
        size = param.size if fdp.ConsumeIntInRange(0, 3) else fdp.ConsumeIntInRange(0, 40)
        return (fdp.PickValueInList(["bytes", "bytearray", "memoryview", "npvoid"]), fdp.ConsumeBytes(size).ljust(size, b"\0"))
    return fdp.PickValueInList([("str", "1"), ("object",), ("raises",), ("float", 1.0), ("int", 2**70),
                                ("bool", True), ("none",), ("bytes", b"1234"), ("complex", 1j),
                                ("npcomplex", "complex64", 1 - 2j), ("npcomplex", "complex128", 3j)])


def make_arg(spec, ctx, fire=None):
    kind = spec[0]
    if kind == "view":
        f = spec[1]
        dev = {1: "cpu", 2: f"cuda:{f['device_id']}", 13: (2, 0)}[f["device_type"]]
        v = jitbridge.from_ptr(f["ptr"], tuple(f["shape"]), f["dtype"], device=dev, strides=tuple(f["strides"]),
                               readonly=f["readonly"])
        return v
    if kind == "cai":
        f = spec[1]
        item = ref.itemsize(f["dtype"])
        special = {"bool": "|b1", "int8": "|i1", "uint8": "|u1", "bfloat16": "<V2"}
        typestr = special[f["dtype"]] if f["dtype"] in special else f"<{f['dtype'][0]}{item}"
        d = {"shape": tuple(f["shape"]), "typestr": typestr, "data": (f["ptr"], f["readonly"]), "version": 3,
             "strides": tuple(s * item for s in f["strides"])}
        return CAIArg(d, fire or (lambda: None))
    if kind == "npint":
        return numpy.dtype(spec[1]).type(spec[2])
    if kind == "npbool":
        return numpy.bool_(spec[1])
    if kind == "npfloat":
        return numpy.array(spec[2], dtype=spec[1])[()]
    if kind == "bytearray":
        return bytearray(spec[1])
    if kind == "memoryview":
        return memoryview(spec[1])
    if kind == "npvoid":
        return numpy.frombuffer(spec[1], dtype=numpy.dtype((numpy.void, len(spec[1]))))[0] if spec[1] else b""
    if kind == "complex":
        return spec[1]
    if kind == "npcomplex":
        return numpy.dtype(spec[1]).type(spec[2])
    return build(spec, ctx)


def expected_args(params, specs):
    """[bytes per parameter] or Invalid."""
    if len(specs) != len(params):
        raise ref.Invalid("wrong argument count")
    device, out = None, []
    for p, s in zip(params, specs):
        if s[0] == "cai":
            s = ("cai", dict(s[1], device_type=2, device_id=0))  # CAI memory is found on the driver's device
        b, device = rl.judge_argument(p, rl.arg_value(s, numpy), device)
        out.append(b)
    return out, device


def same_bytes(got, want):
    return got == want or (len(got) == len(want) and rl.is_nan_bytes(got) and rl.is_nan_bytes(want))


def config_spec(fdp):
    def dims():
        n = fdp.ConsumeIntInRange(0, 7)
        item = lambda: fc.int_spec(fdp, fdp.PickValueInList([1, 2, 4, 32, 64, 65535, 65536, 1024, 1025, 2**31 - 1,
                                                              2**31, 2**32 - 1, 2**32, 0, -1, 2**64]),
                                   allow_bad=fdp.ConsumeIntInRange(0, 7) == 0)
        if n < 3:
            return fc.int_spec(fdp, fdp.ConsumeIntInRange(1, 8), allow_bad=False)
        if n < 6:
            return (fdp.PickValueInList(["tuple", "list"]), [item() for _ in range(fdp.ConsumeIntInRange(1, 3))])
        return fdp.PickValueInList([("tuple", []), ("tuple", [("int", 1)] * 4), ("str", "1"), ("float", 2.0),
                                    ("bool", True), ("none",), item()])
    c = dict(grid=dims(), block=dims(), kw={})
    if fdp.ConsumeIntInRange(0, 3) == 0:
        c["kw"]["shared_mem"] = fc.int_spec(fdp, fdp.PickValueInList([0, 1, 48 * 1024, 226 * 1024, 226 * 1024 + 1,
                                                                      2**32 - 1, 2**32, -1]),
                                            allow_bad=fdp.ConsumeIntInRange(0, 7) == 0)
    if fdp.ConsumeIntInRange(0, 3) == 0:
        c["kw"]["cluster"] = ("none",) if fdp.ConsumeIntInRange(0, 3) == 0 else dims()
    for flag in ("cooperative", "programmatic_dependent"):
        if fdp.ConsumeIntInRange(0, 5) == 0:
            c["kw"][flag] = fdp.PickValueInList([("bool", True), ("bool", False), ("int", 2), ("none",), ("raises",),
                                                 ("truth", True, None)])
    if fdp.ConsumeIntInRange(0, 5) == 0:
        c["kw"]["stream"] = fdp.PickValueInList([("none",), ("int", 1), ("int", 2), ("int", 0x1234), ("int", -1),
                                                 ("bool", True)])
    if fdp.ConsumeIntInRange(0, 31) == 0:
        c["kw"]["sharedmem"] = ("int", 1)
    return c


def judge_config_spec(c, index_ok):
    """(grid, block, cluster, shared, coop, pdl) or Invalid."""
    grid, block = rl.dim3(c["grid"], index_ok), rl.dim3(c["block"], index_ok)
    kw = c["kw"]
    if "sharedmem" in kw:
        raise ref.Invalid("an unknown keyword")
    shared = ref.intval(kw["shared_mem"], index_ok, 0, 2**32 - 1) if "shared_mem" in kw else 0
    cluster = None if kw.get("cluster", ("none",))[0] == "none" else rl.dim3(kw["cluster"], index_ok)
    flags = [ref.truth(kw[f]) if f in kw else False for f in ("cooperative", "programmatic_dependent")]
    if "stream" in kw:
        ref.judge_stream_arg(kw["stream"])
    rl.judge_config(grid, block, cluster, shared, rl.FAKE)
    # A cooperative grid must be co-resident: the fake occupancy API gives 2 blocks per multiprocessor x 132.
    if flags[0] and grid[0] * grid[1] * grid[2] > 2 * 132:
        raise ref.Invalid("a cooperative grid larger than can be resident at once")
    return grid, block, cluster, shared, flags[0], flags[1]


def test_one(data):
    fdp = fc.atheris.FuzzedDataProvider(data)
    name = fdp.PickValueInList(NAMES)
    k, params = KERNELS[name], PARAMS[name]
    n = len(params) if fdp.ConsumeIntInRange(0, 15) else fdp.ConsumeIntInRange(0, len(params) + 1)
    specs = [value_spec(fdp, params[i]) if i < len(params) else ("int", 1) for i in range(n)]
    form = fdp.PickValueInList(["pack", "pack", "call", "call_list", "configured"])
    ctx = hostile.Context()
    # At most one CAI argument changes the argument list (call_list only), once.
    mutate = form == "call_list" and fdp.ConsumeIntInRange(0, 3) == 0
    action = fdp.PickValueInList([("list_clear", "args"), ("list_append", "args", ("int", 1)),
                                  ("list_set", "args", ("none",))]) if mutate else None
    args, fired = [], False
    for s in specs:
        fire = None
        if s[0] == "cai" and action is not None and not fired:
            fired, once = True, hostile._once(ctx, action)
            fire = once
        args.append(make_arg(s, ctx, fire))
    if not fired:
        action = None
    states = [specs]
    if action is not None:
        after = hostile.apply_action({"args": ("list", list(specs))}, action)["args"][1]
        states.append(after)
    context = f"{name} {form} args={specs!r}"

    outcomes = []
    for st in states:
        for index_ok in (True, False):
            try:
                packed, device = expected_args(params, st)
                if form != "pack" and device not in (None, 0):
                    raise ref.Invalid(f"the arrays are on cuda:{device}, which this machine does not have")
                outcomes.append(ref.Accept(dict(bytes=packed, params=params)))
            except ref.Invalid as e:
                outcomes.append(ref.Refuse(str(e)))
    if form == "pack":
        fc.check(lambda: testing.pack_args(k, *args), outcomes, "pack_args " + context, compare_packed,
                 producer_may_raise=True)
        return
    c = config_spec(fdp)
    config_outcomes = []
    for index_ok in (True, False):
        try:
            config_outcomes.append(judge_config_spec(c, index_ok))
        except ref.Invalid as e:
            config_outcomes.append(ref.Refuse(str(e)))
    both = []
    for o in outcomes:
        for co in config_outcomes:
            if isinstance(o, ref.Refuse) or isinstance(co, ref.Refuse):
                both.append(o if isinstance(o, ref.Refuse) else co)
            else:
                both.append(ref.Accept(dict(o.facts, config=co)))
    kw = {key: build(spec, ctx) for key, spec in c["kw"].items()}
    grid, block = build(c["grid"], ctx), build(c["block"], ctx)
    if form == "configured":
        def call():
            before = last_launch().count
            if "shared_mem" in kw and fdp.ConsumeBool():
                k[grid, block, kw.pop("stream", None), kw.pop("shared_mem")](*args, **kw)
            else:
                k[grid, block](*args, **kw)
            return before
    else:
        arglist = args if form == "call_list" else tuple(args)
        ctx.lists["args"] = arglist if form == "call_list" else None

        def call():
            before = last_launch().count
            k(grid, block, arglist, **kw)
            return before
    fc.check(call, both, f"launch {context} config={c!r}", compare_launch, producer_may_raise=True)


def compare_packed(packed, facts):
    want = facts["bytes"]
    if len(packed) != len(want):
        return f"{len(packed)} parameters packed, {len(want)} expected"
    for i, (g, w) in enumerate(zip(packed, want)):
        if not same_bytes(bytes(g), w):
            return f"parameter {i} packed as {bytes(g).hex()}, expected {w.hex()}"
    return None


def compare_launch(before, facts):
    launch = last_launch()
    grid, block, cluster, shared, coop, pdl = facts["config"]
    if launch.count != before + 1:
        return "the driver saw no launch"
    got = (tuple(launch.grid), tuple(launch.block), tuple(launch.cluster), launch.shared_mem, bool(launch.cooperative),
           bool(launch.programmatic))
    want = (grid, block, cluster or (0, 0, 0), shared, coop, pdl)
    if got != want:
        return f"the driver received {got}, configured {want}"
    if facts["bytes"] and not (launch.buffer_form or launch.pointer_form):
        return "the parameters did not reach the driver (neither one buffer nor kernelParams)"
    space = bytes(launch.params[:launch.param_bytes])
    offset = 0
    for p, w in zip(facts["params"], facts["bytes"]):
        offset = (offset + max(p.align, 1) - 1) // max(p.align, 1) * max(p.align, 1)
        if not same_bytes(space[offset:offset + p.size], w):
            return f"parameter {p.spelling} reached the driver as {space[offset:offset + p.size].hex()}, not {w.hex()}"
        offset += p.size
    return None


if __name__ == "__main__":
    fc.run(test_one, sys.argv)
