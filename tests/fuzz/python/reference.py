"""reference.py — the reference validators of the Python fuzz targets: what a view, a CAI dict, a from_ptr call,
an argument list or a launch configuration must give, computed with Python's exact integers and written apart from
the code it judges. Each judge returns an Outcome: Refuse(reason) or Accept(facts)."""
import math
import struct
from dataclasses import dataclass, field

INT64_MAX = 2**63 - 1
INT64_MIN = -2**63
UINT64_MAX = 2**64 - 1
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Refuse:
    reason: str


@dataclass
class Accept:
    facts: dict = field(default_factory=dict)


# ---- dtypes -------------------------------------------------------------------------------------------------------
# (code, bits, lanes) of DLPack, by the canonical NumPy-style name jitbridge prints.
DTYPES = {
    "bool": (6, 8, 1), "int8": (0, 8, 1), "int16": (0, 16, 1), "int32": (0, 32, 1), "int64": (0, 64, 1),
    "uint8": (1, 8, 1), "uint16": (1, 16, 1), "uint32": (1, 32, 1), "uint64": (1, 64, 1),
    "float16": (2, 16, 1), "float32": (2, 32, 1), "float64": (2, 64, 1), "bfloat16": (4, 16, 1),
    "complex64": (5, 64, 1), "complex128": (5, 128, 1),
    "float8_e3m4": (7, 8, 1), "float8_e4m3": (8, 8, 1), "float8_e4m3b11fnuz": (9, 8, 1), "float8_e4m3fn": (10, 8, 1),
    "float8_e4m3fnuz": (11, 8, 1), "float8_e5m2": (12, 8, 1), "float8_e5m2fnuz": (13, 8, 1),
    "float8_e8m0fnu": (14, 8, 1),
}
ALIASES = {"half": "float16", "float": "float32", "double": "float64", "bf16": "bfloat16", "bool_": "bool",
           "int": "int64"}
BY_TRIPLE = {v: k for k, v in DTYPES.items()}


def void_name(s):
    """A structured (opaque bytes) dtype's name, 'void<bits>', as (code, bits, lanes), or None."""
    if len(s) > 4 and len(s) <= 11 and s.startswith("void") and s[4:].isdigit() and s[4:].isascii():
        bits = int(s[4:])
        if bits % 8 == 0 and 8 <= bits and bits // 8 <= 0xFFFF:
            return (3, 8, bits // 8)
    return None


def itemsize(name):
    code, bits, lanes = DTYPES[name] if name in DTYPES else void_name(name)
    return bits // 8 * lanes


def typestr_dtype(t):
    """The dtype name a __cuda_array_interface__ typestr names, or None when it must be refused."""
    if len(t) < 3 or t[0] not in "<>|=" or not all("0" <= c <= "9" for c in t[2:]):
        return None
    n = int(t[2:])
    if t[0] == ">" and n > 1:
        return None  # big-endian data
    return {("b", 1): "bool", ("i", 1): "int8", ("i", 2): "int16", ("i", 4): "int32", ("i", 8): "int64",
            ("u", 1): "uint8", ("u", 2): "uint16", ("u", 4): "uint32", ("u", 8): "uint64",
            ("f", 2): "float16", ("f", 4): "float32", ("f", 8): "float64", ("c", 8): "complex64",
            ("c", 16): "complex128", ("V", 2): "bfloat16"}.get((t[1], n),
                                                                f"void{n * 8}" if t[1] == "V" and 1 <= n <= 0xFFFF else None)


def dtype_from_text(s):
    """The dtype a dtype= string names ('float32', 'torch.half', '<f4', 'f4'), or None."""
    if s.startswith("torch."):
        s = s[6:]
    if s in DTYPES:
        return s
    if s in ALIASES:
        return ALIASES[s]
    if void_name(s):
        return s
    if len(s) >= 2 and s[0] in "<>|=":
        return typestr_dtype(s)
    if len(s) >= 2 and s[0] in "biufcV" and all("0" <= c <= "9" for c in s[1:]):
        return typestr_dtype("<" + s)
    return None


# ---- the view contract ----------------------------------------------------------------------------------------------
def judge_view(data, byte_offset, shape, strides, triple):
    """The view contract of validate_view (interop/include/jitbridge/array.hpp): shape/strides in elements
    (strides None: C order), triple = (code, bits, lanes). Accept facts: ptr, shape, strides, size, nbytes."""
    code, bits, lanes = triple
    if lanes == 0 or bits == 0:
        return Refuse("a dtype with 0 bits or lanes")
    if len(shape) > 64:
        return Refuse("more than 64 dimensions")
    if any(s < 0 for s in shape):
        return Refuse("a negative extent")
    if strides is not None and len(strides) != len(shape):
        return Refuse("strides and shape differ in length")
    item = (bits * lanes + 7) // 8
    if item * math.prod(s for s in shape if s != 0) > INT64_MAX:
        return Refuse("the array is too big")
    ptr = data + byte_offset
    if ptr > UINT64_MAX:
        return Refuse("data + byte_offset wraps")
    if strides is None:
        strides, step = [], 1
        for s in reversed(shape):
            strides.insert(0, step)
            step *= max(s, 1)
    count = math.prod(shape)
    whole = bits // 8 * lanes if bits % 8 == 0 else 0
    facts = dict(ptr=ptr, shape=tuple(shape), strides=tuple(strides), size=count, nbytes=count * whole)
    if count == 0:
        return Accept(facts)
    if data == 0:
        return Refuse("NULL data for a non-empty array")
    if any(not (INT64_MIN <= st * item <= INT64_MAX) for st in strides):
        return Refuse("a stride in bytes overflows int64")
    lo = sum((s - 1) * st for s, st in zip(shape, strides) if st < 0)
    hi = sum((s - 1) * st for s, st in zip(shape, strides) if st > 0)
    if (hi - lo + 1) * item > INT64_MAX:
        return Refuse("the byte extent overflows int64")
    if ptr + lo * item < 0 or ptr + (hi + 1) * item - 1 > UINT64_MAX:
        return Refuse("the addressed bytes wrap around the address space")
    return Accept(facts)


def c_contiguous(shape, strides):
    if 0 in shape:
        return True
    expected = 1
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1 and st != expected:
            return False
        expected *= s
    return True


# ---- scalars as the bindings read them ------------------------------------------------------------------------------
class Invalid(Exception):
    """Raised inside a judge: the input must be refused (the message says why)."""


def as_int(spec, lo=INT64_MIN, hi=INT64_MAX):
    """The integer a value spec stands for (hostile.py's specs), or Invalid. Bools never are ints."""
    kind = spec[0]
    if kind == "nd0" and isinstance(spec[1], int):
        kind = "index"  # a 0-d integer array has __index__
    if kind in ("int", "intsub", "index"):
        v = spec[1]
        if not lo <= v <= hi:
            raise Invalid(f"{v} out of range")
        return v
    raise Invalid(f"a {kind} is not an int")


def truth(spec):
    """bool() of a spec's object; Invalid when its __bool__ raises."""
    kind = spec[0]
    if kind in ("bool",):
        return spec[1]
    if kind in ("int", "intsub"):
        return spec[1] != 0
    if kind == "float":
        return spec[1] != 0
    if kind in ("str", "bytes"):
        return len(spec[1]) > 0
    if kind == "none":
        return False
    if kind in ("truth",):
        return spec[1]
    if kind == "nd0":
        return bool(spec[1])
    if kind == "raises":
        raise Invalid("bool() raises")
    if kind in ("tuple", "tuplesub", "list", "listsub"):
        return len(spec[1]) > 0
    return True  # objects, __index__ objects, iterators


def intval(spec, index_ok, lo=INT64_MIN, hi=INT64_MAX):
    """An int field: ints and int subclasses; __index__ objects when `index_ok` (the contract leaves them open);
    never bools, floats, text or None."""
    kind = spec[0]
    if kind in ("index", "nd0") and not index_ok:
        raise Invalid("an __index__ object where an int is read")
    return as_int(spec, lo, hi)


def int_tuple(spec, index_ok, lo=INT64_MIN, hi=INT64_MAX, any_iterable=False):
    kinds = ("tuple", "tuplesub", "list", "listsub") + (("iter",) if any_iterable else ())
    if spec[0] not in kinds:
        raise Invalid(f"a {spec[0]} where a tuple of ints is read")
    if len(spec[1]) > 64:
        raise Invalid("more than 64 entries")
    return [intval(s, index_ok, lo, hi) for s in spec[1]]


def judge_cai(st, index_ok):
    """A __cuda_array_interface__ dict (field -> spec) as as_array must read it: versions 0-3; shape, typestr
    and data required; no mask; stream not 0 nor negative; then the view contract with byte strides."""
    try:
        for key in ("version", "shape", "typestr", "data"):
            if key not in st:
                raise Invalid(f"no '{key}'")
        if not 0 <= intval(st["version"], index_ok) <= 3:
            raise Invalid("unsupported version")
        if st.get("mask", ("none",))[0] != "none":
            raise Invalid("a mask")
        if st["typestr"][0] != "str":
            raise Invalid("typestr is not a str")
        try:
            st["typestr"][1].encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid("typestr is not valid text")
        data = st["data"]
        if data[0] == "none":
            ptr, readonly = 0, False
        elif data[0] in ("tuple", "tuplesub") and len(data[1]) == 2:
            ptr = intval(data[1][0], index_ok, 0, UINT64_MAX)
            readonly = truth(data[1][1])
        else:
            raise Invalid("data is not a (pointer, read_only) tuple")
        shape = int_tuple(st["shape"], index_ok)
        strides = None
        if st.get("strides", ("none",))[0] != "none":
            strides = int_tuple(st["strides"], index_ok)
            if len(strides) != len(shape):
                raise Invalid("strides and shape differ in length")
        if st.get("stream", ("none",))[0] != "none":
            if intval(st["stream"], index_ok) <= 0:
                raise Invalid("stream 0 or negative")
        name = typestr_dtype(st["typestr"][1])
        if name is None:
            raise Invalid("an unsupported typestr")
    except Invalid as e:
        return Refuse(str(e))
    item = itemsize(name)
    if strides is not None:
        if any(b % item for b in strides):
            return Refuse("a byte stride not a multiple of the item size")
        strides = [b // item for b in strides]
    out = judge_view(ptr, 0, shape, strides, DTYPES[name] if name in DTYPES else void_name(name))
    if isinstance(out, Accept):
        out.facts.update(dtype=name, readonly=readonly, device="cuda:0", itemsize=item)
    return out


def judge_stream_arg(spec):
    """as_array's / from_ptr's stream=: None, or an int handle in [0, 2**64). The view's stream value, or Invalid."""
    if spec[0] == "none":
        return 1
    return intval(spec, False, 0, UINT64_MAX)


def judge_dtype_arg(spec, numpy):
    """from_ptr's dtype=: a name ('float32', 'torch.half', '<f4', 'f4'), bool/int/float/complex, or (with NumPy
    imported) anything numpy.dtype() takes that is little-endian and supported. The name, or Invalid."""
    kind = spec[0]
    if kind == "pytype":
        return {"bool": "bool", "int": "int64", "float": "float64", "complex": "complex128"}[spec[1]]
    if kind == "none":
        raise Invalid("no dtype")
    if kind == "str":
        s = spec[1]
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid("dtype text is not valid UTF-8")
        text = s[6:] if s.startswith("torch.") else s
        if text in DTYPES or text in ALIASES:
            return dtype_from_text(s)
        if len(text) >= 2 and text[0] in "<>|=":
            name = typestr_dtype(text)
            if name is None:
                raise Invalid("unsupported typestr")
            return name
        name = dtype_from_text(s)
        if name is not None:
            return name
        obj = s
    elif kind == "np":
        obj = spec[1]
    else:
        obj = object()
    if numpy is None:
        raise Invalid("not a dtype name")
    try:
        nd = numpy.dtype(obj)
    except Exception:  # noqa: BLE001 - NumPy decides what a dtype is
        raise Invalid("numpy.dtype() refuses it")
    if nd.byteorder == ">":
        raise Invalid("big-endian")
    if nd.shape != ():
        raise Invalid("a subarray dtype")
    if nd.fields is not None and nd.itemsize > 0:  # a structured dtype: opaque bytes of its size (issue 14)
        return nd.name
    if void_name(nd.name):  # numpy.dtype("V8"): opaque bytes, as the text "V8" is
        return nd.name
    if nd.name not in DTYPES:
        raise Invalid("unsupported dtype")
    return nd.name


def judge_device_arg(spec, index_ok):
    """from_ptr's device=: None (the current device: cuda:0 here), an ordinal, a (type, id) tuple of CPU (1) or
    CUDA (2), 'cpu', 'cuda', 'cuda:N' (at most 9 digits). The device name, or Invalid."""
    kind = spec[0]
    if kind == "none":
        return "cuda:0"
    if kind == "bool":
        raise Invalid("a bool device")
    if kind in ("int", "intsub"):
        return f"cuda:{intval(spec, index_ok, 0, INT32_MAX)}"
    if kind in ("tuple", "tuplesub") and len(spec[1]) == 2:
        t = intval(spec[1][0], index_ok)
        i = intval(spec[1][1], index_ok)
        if t not in (1, 2) or not 0 <= i <= INT32_MAX:
            raise Invalid("not a CPU or CUDA device")
        return "cpu" if t == 1 else f"cuda:{i}"
    if kind != "str":
        raise Invalid(f"a {kind} is not a device")
    s = spec[1]
    if s == "cpu":
        return "cpu"
    if s == "cuda":
        return "cuda:0"
    digits = s[5:]
    if s.startswith("cuda:") and digits and all(c in "0123456789" for c in digits) and len(s) < 15:
        return f"cuda:{int(digits)}"
    raise Invalid("not a device name")


def judge_from_ptr(st, index_ok, numpy, devices=None):
    """jitbridge.from_ptr(ptr, shape, dtype, device=, strides=, readonly=, stream=) as the contract has it.
    `devices`: how many GPUs the driver sees (None: no driver, when any CUDA ordinal describes a view)."""
    try:
        p = st["ptr"]
        if p[0] == "index" and not index_ok or p[0] not in ("int", "intsub", "index"):
            raise Invalid("ptr is not an int")
        ptr = intval(p, True, 0, UINT64_MAX)
        s = st["shape"]
        if s[0] in ("str", "bytes"):
            raise Invalid("text as a shape")
        if s[0] in ("int", "intsub", "index"):
            shape = [intval(s, index_ok)]
        else:
            shape = int_tuple(s, index_ok, any_iterable=True)
        if any(x < 0 for x in shape):
            raise Invalid("a negative extent")
        name = judge_dtype_arg(st["dtype"], numpy)
        device = judge_device_arg(st["device"], index_ok)
        if devices is not None and device.startswith("cuda:") and int(device[5:]) >= devices:
            raise Invalid("a device the driver does not have")
        strides = None
        if st["strides"][0] != "none":
            if st["strides"][0] in ("str", "bytes"):
                raise Invalid("text as strides")
            strides = int_tuple(st["strides"], index_ok, any_iterable=True)
            if len(strides) != len(shape):
                raise Invalid("strides and shape differ in length")
        stream = judge_stream_arg(st["stream"])
    except Invalid as e:
        return Refuse(str(e))
    out = judge_view(ptr, 0, shape, strides, DTYPES[name] if name in DTYPES else void_name(name))
    if isinstance(out, Accept):
        out.facts.update(dtype=name, device=device, readonly=st["readonly"], itemsize=itemsize(name))
        if st["stream"][0] == "none" or stream != 0:
            out.facts["stream"] = stream
    return out


def device_name(device_type, device_id):
    """What jitbridge prints for a DLPack device."""
    return {1: "cpu", 2: f"cuda:{device_id}", 3: "cuda_host", 13: f"cuda_managed:{device_id}"}.get(
        device_type, f"device(type={device_type}, id={device_id})")


def dtype_name(triple):
    """The name jitbridge prints for (code, bits, lanes), or None for codes it has no name for."""
    code, bits, lanes = triple
    base = BY_TRIPLE.get((code, bits, 1))
    if base is None:
        return None
    return base if lanes == 1 else f"{base}x{lanes}"


def judge_capsule(c):
    """A DLPack capsule as as_array must take it. `c`: name, versioned, major, flags, ndim, shape (None: NULL),
    strides (None: NULL), triple, data, byte_offset, device (type, id)."""
    if c["name"].startswith("used_"):
        return Refuse("an already consumed capsule")
    if c["name"] not in ("dltensor_versioned", "dltensor"):
        return Refuse("a capsule of another name")
    if c["versioned"] and c["major"] != 1:
        return Refuse("DLPack major version is not 1")
    if c["ndim"] < 0:
        return Refuse("negative ndim")
    if c["ndim"] > 0 and c["shape"] is None:
        return Refuse("NULL shape")
    out = judge_view(c["data"], c["byte_offset"], c["shape"] or [], c["strides"], c["triple"])
    if isinstance(out, Accept):
        out.facts.update(device=device_name(*c["device"]), readonly=bool(c["versioned"] and c["flags"] & 1))
        name = dtype_name(c["triple"])
        if name is not None:
            out.facts["dtype"] = name
    return out
