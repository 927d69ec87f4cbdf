"""reference_launch.py — the launch references of the Python targets: how a Python value reaches a kernel
parameter (the value classes of docs/DESIGN.md "Launching"), whether it fits the parameter as the compiler printed
it (pointers, tensor views, scalars with exact ranges, structs as bytes), the bytes it must become, and whether a
launch configuration is valid on the fake GPU (tests/fuzz/fake_cuda/fake_cuda.h)."""
import math
import struct

from reference import DTYPES, INT64_MAX, INT64_MIN, UINT64_MAX, Invalid

ELEMENTS = {
    "float": "float32", "double": "float64", "__half": "float16", "half": "float16", "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16", "int": "int32", "unsigned int": "uint32", "short": "int16", "unsigned short": "uint16",
    "long": "int64", "unsigned long": "uint64", "long long": "int64", "unsigned long long": "uint64",
    "signed char": "int8", "char": "int8", "unsigned char": "uint8", "bool": "bool", "float2": "complex64",
    "double2": "complex128", "__nv_fp8_e4m3": "float8_e4m3fn", "__nv_fp8_e5m2": "float8_e5m2",
}
SCALARS = {  # spelling -> (kind, bytes)
    "int": ("sint", 4), "unsigned int": ("uint", 4), "long": ("sint", 8), "unsigned long": ("uint", 8),
    "long long": ("sint", 8), "unsigned long long": ("uint", 8), "short": ("sint", 2), "unsigned short": ("uint", 2),
    "char": ("sint", 1), "signed char": ("sint", 1), "unsigned char": ("uint", 1), "bool": ("bool", 1),
    "float": ("f32", 4), "double": ("f64", 8), "__half": ("f16", 2), "__nv_bfloat16": ("bf16", 2),
}
FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]


def arg_value(spec, numpy):
    """The value a launch argument spec becomes before it meets a parameter:
    ('null',), ('bool', b), ('int', v) (any int64 or uint64), ('float', x), ('bytes', b), ('array', facts),
    ('complex', z, single) (complex and numpy.complex128; numpy.complex64 with single: never as bytes)."""
    kind = spec[0]
    if kind == "none":
        return ("null",)
    if kind in ("bool", "npbool"):
        return ("bool", bool(spec[1]))
    if kind in ("int", "intsub", "index", "npint"):  # NumPy integers of any width: their value (__index__)
        v = spec[1] if kind != "npint" else spec[2]
        if not INT64_MIN <= v <= UINT64_MAX:
            raise Invalid("an int beyond 64 bits")
        return ("int", v)
    if kind in ("float", "floatlike"):
        return ("float", spec[1])
    if kind == "npfloat":  # NumPy float64/float32/float16 scalars: their value, as a float (exact in a double)
        if spec[1] in ("float64", "float32", "float16"):
            return ("float", float(numpy.array(spec[2], dtype=spec[1])[()]))
        return ("bytes", numpy.array(spec[2], dtype=spec[1]).tobytes())  # longdouble: its bytes
    if kind == "complex":
        return ("complex", complex(spec[1]), False)
    if kind == "npcomplex":  # numpy.complex128 is a complex; numpy.complex64 too, with float parts
        return ("complex", complex(spec[2]), spec[1] == "complex64")
    if kind in ("bytes", "bytearray", "memoryview", "npvoid"):
        return ("bytes", bytes(spec[1]))
    if kind in ("view", "cai"):
        return ("array", spec[1])
    raise Invalid(f"a {kind} is no kernel argument")


def complex_bits(s):
    """64 / 128 for the complex-of-float / -of-double spellings (float2, cuda::std[::__N]::complex<float>,
    thrust::complex<float>, ...), else 0."""
    if s in ("float2", "double2"):
        return 64 if s == "float2" else 128
    if not (s.startswith("cuda::std::") or s.startswith("thrust::")):
        return 0
    return 64 if s.endswith("::complex<float>") else 128 if s.endswith("::complex<double>") else 0


def _pointee(s):
    p = s[:-1].strip()
    const = False
    if p.endswith(" const"):
        const, p = True, p[:-6].strip()
    elif p.startswith("const "):
        const, p = True, p[6:].strip()
    if p.endswith(" volatile"):
        p = p[:-9].strip()
    return p, const


def _array_problem(a, element, const, device):
    if a["device_type"] not in (2, 13):
        return "not device memory"
    if device is not None and a["device_id"] != device:
        return "arrays on two devices"
    if a["readonly"] and not const:
        return "a read-only array into a non-const pointee"
    if element == "void" or a["dtype"] == ELEMENTS.get(element):
        return None
    if element == "char" and a["dtype"] in ("int8", "uint8"):
        return None
    return "the dtype does not match the element type" if element in ELEMENTS else "the element type takes no array"


def judge_argument(param, value, device):
    """(bytes, device) when `value` fits `param` (spelling, size), else Invalid. `device`: the first array's
    device id so far (None: no array yet)."""
    s, size = param.spelling.strip(), param.size
    kind = value[0]

    def exactly(b):
        if len(b) != size:
            raise Invalid("the signature's size is not the value's")
        return b

    if s.endswith("*"):
        element, const = _pointee(s)
        if kind == "null":
            return exactly(bytes(8)), device
        if kind != "array":
            raise Invalid("a pointer takes an array or None")
        a = value[1]
        why = _array_problem(a, element, const, device)
        if why:
            raise Invalid(why)
        return exactly(struct.pack("<Q", a["ptr"])), a["device_id"] if device is None else device
    if s.startswith("jitbridge::Tensor<") and s.endswith(">") and "," in s:
        inner = s[len("jitbridge::Tensor<"):-1]
        element, rank = inner[:inner.rindex(",")], inner[inner.rindex(",") + 1:].lstrip(" ")
        if rank.isdigit() and rank.isascii() and 0 < int(rank) <= 2**31 - 1:
            rank = int(rank)
            const = False
            if len(element) > 6 and element.endswith(" const"):
                const, element = True, element[:-6]
            elif element.startswith("const "):
                const, element = True, element[6:]
            if kind != "array":
                raise Invalid("a tensor view takes an array")
            a = value[1]
            why = _array_problem(a, element, const, device)
            if why:
                raise Invalid(why)
            if len(a["shape"]) != rank:
                raise Invalid("the array's ndim is not the view's rank")
            if size != 8 + 16 * rank:
                raise Invalid("the signature's size is not a tensor view's")
            b = struct.pack(f"<Q{rank}q{rank}q", a["ptr"], *a["shape"], *a["strides"])
            return b, a["device_id"] if device is None else device
    bits = complex_bits(s) if s not in SCALARS else 0
    if bits and size == bits // 8:
        if kind == "bytes":
            return exactly(value[1]), device
        if kind != "complex":
            raise Invalid("a complex parameter takes a complex value")
        z, single = value[1], value[2]
        if bits == 64:
            if not single and any(math.isfinite(x) and abs(x) > FLT_MAX for x in (z.real, z.imag)):
                raise Invalid("a part beyond float's range")
            return exactly(struct.pack("<ff", z.real, z.imag)), device
        if single:
            raise Invalid("numpy.complex64 into a complex of double")
        return exactly(struct.pack("<dd", z.real, z.imag)), device
    if kind == "complex":
        raise Invalid("a complex into a parameter that is not complex")
    if s not in SCALARS:
        if kind != "bytes" or len(value[1]) != size:
            raise Invalid("a by-value struct takes bytes of its size")
        return value[1], device
    skind, nbytes = SCALARS[s]
    if kind == "bytes":
        return exactly(value[1]), device
    if kind in ("array", "null"):
        raise Invalid("a scalar takes no array or None")
    if skind == "bool":
        if kind != "bool":
            raise Invalid("bool takes True or False")
        return exactly(bytes([value[1]])), device
    if skind in ("sint", "uint"):
        if kind == "float":
            raise Invalid("an integer parameter takes an integer")
        v = int(value[1])
        lo, hi = (-2**(8 * nbytes - 1), 2**(8 * nbytes - 1) - 1) if skind == "sint" else (0, 2**(8 * nbytes) - 1)
        if not lo <= v <= hi:
            raise Invalid("the integer does not fit")
        return exactly((v % 2**(8 * nbytes)).to_bytes(nbytes, "little")), device
    if kind == "bool":
        raise Invalid("a floating parameter takes a number, not a bool")
    x = float(value[1])
    finite = math.isfinite(x)
    if skind == "f32":
        if finite and abs(x) > FLT_MAX:
            raise Invalid("beyond float's range")
        return exactly(struct.pack("<f", x)), device
    if skind == "f64":
        return exactly(struct.pack("<d", x)), device
    if skind == "f16":
        if finite and abs(x) > 65504.0:
            raise Invalid("beyond half's range")
        return exactly(_half(struct.unpack("<f", struct.pack("<f", x))[0])), device
    if finite and abs(x) > FLT_MAX:
        raise Invalid("beyond bfloat16's range")
    return exactly(_bfloat16(struct.unpack("<f", struct.pack("<f", x))[0])), device


def _half(f):
    """binary16 of float `f`, rounded to nearest even (struct's 'e' format rounds so; beyond 65504 it raises)."""
    if math.isnan(f):
        return b"\x00\x7e"
    if abs(f) >= 65520.0:
        return b"\x00\x7c" if f > 0 else b"\x00\xfc"
    return struct.pack("<e", f)


def _bfloat16(f):
    x = struct.unpack("<I", struct.pack("<f", f))[0]
    if (x & 0x7FFFFFFF) > 0x7F800000:
        return struct.pack("<H", (x >> 16) | 0x40)
    x += 0x7FFF + ((x >> 16) & 1)
    return struct.pack("<H", (x >> 16) & 0xFFFF)


def is_nan_bytes(b):
    """Whether `b` is a NaN of its width (any NaN satisfies a NaN argument)."""
    if len(b) == 4:
        return math.isnan(struct.unpack("<f", b)[0])
    if len(b) == 8:
        return math.isnan(struct.unpack("<d", b)[0])
    if len(b) == 2:
        h = struct.unpack("<H", b)[0]
        return (h & 0x7C00 == 0x7C00 and h & 0x3FF) or (h & 0x7F80 == 0x7F80 and h & 0x7F)
    return False


def dim3(spec, index_ok):
    """grid=/block=/cluster=: an int or a tuple/list of 1 to 3 ints, each 1..2**32-1 (never a bool)."""
    from reference import intval
    if spec[0] in ("tuple", "list", "tuplesub", "listsub"):
        items = spec[1]
        if not 1 <= len(items) <= 3:
            raise Invalid("1 to 3 dimensions")
    elif spec[0] in ("int", "intsub", "index") or (spec[0] == "nd0" and isinstance(spec[1], int)):
        items = [spec]   # one int (a 0-d integer array has __index__, as in a tuple)
    else:
        raise Invalid(f"a {spec[0]} as dimensions")
    out = [intval(s, index_ok, 1, 2**32 - 1) for s in items]
    return tuple(out + [1] * (3 - len(out)))


def judge_config(grid, block, cluster, shared, fake):
    """Whether the fake GPU runs it: fake = the constants of fake_cuda.h. Raises Invalid."""
    for i in range(3):
        if grid[i] > fake["grid"][i]:
            raise Invalid("a grid dimension beyond the device's")
        if block[i] > fake["block"][i]:
            raise Invalid("a block dimension beyond the device's")
    if math.prod(block) > fake["threads"]:
        raise Invalid("too many threads per block")
    if shared > 0 and shared + fake["static_shared"] > fake["optin"]:
        raise Invalid("too much shared memory")
    if cluster is not None:
        if any(g % c for g, c in zip(grid, cluster)):
            raise Invalid("the cluster does not divide the grid")
        if math.prod(cluster) > 16:
            raise Invalid("a cluster of more than 16 blocks")


FAKE = dict(grid=(2**31 - 1, 65535, 65535), block=(1024, 1024, 64), threads=1024, static_shared=1024,
            optin=227 * 1024)
