"""NumPy scalars as kernel arguments, without a GPU: by value under the rules Python numbers follow (issue 28).

Every NumPy scalar kind into every scalar parameter type gives what its Python equivalent gives (the same bytes, or
the same exception with the same words), on the full path (jitbridge_testing.pack_args) and on the launch shortcut (a
child on the fake driver of tests/fuzz/fake_cuda, which records the parameter bytes each launch reached the driver
with)."""
import math
import struct

import numpy as np
import pytest

import jitbridge
from fake_driver import LAUNCH_PRELUDE, run_json_child
from gpu_frameworks import MADE_UP_ADDRESSES
from testing_hooks import hooks

pytestmark = MADE_UP_ADDRESSES

PARAMS = ["int", "unsigned int", "short", "unsigned short", "char", "signed char", "unsigned char", "long long",
          "unsigned long long", "bool", "float", "double", "__half", "__nv_bfloat16"]
SRC = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + "".join(
    f'extern "C" __global__ void k{i}({t} v) {{}}\n' for i, t in enumerate(PARAMS))

INT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
FLOAT_TYPES = [np.float16, np.float32, np.float64]


def numpy_values():
    """(numpy scalar, its Python equivalent): edges of every width, random values, specials."""
    rng = np.random.default_rng()
    out = []
    for t in INT_TYPES:
        info = np.iinfo(t)
        for v in {int(info.min), int(info.max), 0, 1, int(rng.integers(info.min, info.max, dtype=t, endpoint=True))}:
            out.append((t(v), v))
    for t in FLOAT_TYPES:
        info = np.finfo(t)
        for v in [float(info.max), -float(info.max), float(info.tiny), 0.5, -0.0, math.inf, -math.inf, math.nan,
                  float(t(rng.standard_normal() * 1000)), 3.0]:
            x = t(v)
            out.append((x, float(x)))
    out += [(np.bool_(True), True), (np.bool_(False), False)]
    return out


@pytest.fixture(scope="module")
def kernels():
    m = jitbridge.RawModule(SRC, arch="sm_90")
    return {t: m.get_function(f"k{i}") for i, t in enumerate(PARAMS)}


def outcome(kernel, value):
    """('ok', bytes) or (exception type, message with the argument's type name taken out)."""
    try:
        return ("ok", bytes(hooks.pack_args(kernel, value)[0]))
    except (TypeError, ValueError, OverflowError) as e:
        name = type(value).__name__ if type(value).__module__ == "builtins" else "numpy." + type(value).__name__
        return (type(e), str(e).replace(f"got {name};", "got T;"))


def same_bytes(a, b):
    if a == b:
        return True
    # any NaN of the width equals any other (as the fuzz references compare them)
    fmt = {2: "<e", 4: "<f", 8: "<d"}.get(len(a))
    return fmt is not None and len(a) == len(b) and all(math.isnan(struct.unpack(fmt, x)[0]) for x in (a, b))


@pytest.mark.parametrize("param", PARAMS)
def test_numpy_scalars_follow_the_rules_of_python_numbers(kernels, param):
    k = kernels[param]
    for value, python in numpy_values():
        got, want = outcome(k, value), outcome(k, python)
        assert got[0] == want[0], (param, value, type(value), got, want)
        if got[0] == "ok":
            assert same_bytes(got[1], want[1]), (param, value, type(value), got, want)
        else:
            assert got[1] == want[1], (param, value, type(value), got, want)


def test_the_rules_in_words(kernels):
    widened = hooks.pack_args(kernels["double"], np.float32(0.1))[0]
    assert struct.unpack("<d", widened)[0] == float(np.float32(0.1))  # widening
    assert struct.unpack("<f", hooks.pack_args(kernels["float"], np.float16(0.1))[0])[0] == float(np.float16(0.1))
    assert np.frombuffer(hooks.pack_args(kernels["__half"], np.float32(0.5))[0], np.float16)[0] == 0.5
    assert struct.unpack("<f", hooks.pack_args(kernels["float"], np.float64(0.1))[0])[0] == np.float32(0.1)  # rounded
    with pytest.raises(OverflowError, match=r"k10: argument 0 \(float\): 1e\+300 is out of range for 'float'"):
        hooks.pack_args(kernels["float"], np.float64(1e300))
    with pytest.raises(OverflowError, match="out of range for '__half'"):
        hooks.pack_args(kernels["__half"], np.float32(1e5))
    with pytest.raises(TypeError, match=r"got numpy.float32; 'int' takes an integer"):
        hooks.pack_args(kernels["int"], np.float32(1.0))   # before: its 4 bytes went in as they were
    with pytest.raises(OverflowError, match="300 does not fit in 'unsigned char'"):
        hooks.pack_args(kernels["unsigned char"], np.int64(300))
    with pytest.raises(OverflowError, match="-1 does not fit in 'unsigned int'"):
        hooks.pack_args(kernels["unsigned int"], np.int8(-1))
    assert hooks.pack_args(kernels["unsigned long long"], np.uint64(2**64 - 1))[0] == b"\xff" * 8
    with pytest.raises(TypeError, match="'bool' takes True or False"):
        hooks.pack_args(kernels["bool"], np.int8(1))
    assert hooks.pack_args(kernels["bool"], np.bool_(True))[0] == b"\x01"


def test_subclasses_and_other_numpy_floats_keep_their_rules(kernels):
    class MyFloat32(np.float32):
        pass

    # not exactly numpy.float32: a buffer, its bytes (as before)
    assert hooks.pack_args(kernels["float"], MyFloat32(2.0))[0] == struct.pack("<f", 2.0)
    with pytest.raises(ValueError, match="got 4 bytes; the parameter has 8"):
        hooks.pack_args(kernels["double"], MyFloat32(2.0))
    if np.dtype(np.longdouble).itemsize not in (4, 8):
        with pytest.raises(ValueError, match="bytes; the parameter has 8"):
            hooks.pack_args(kernels["double"], np.longdouble(2.0))


SHORTCUT_CHILD = LAUNCH_PRELUDE + r'''
import json
import numpy as np
import jitbridge
import jitbridge_testing as hooks

k = jitbridge.RawKernel(r"""#include <cuda_fp16.h>
extern "C" __global__ void f(float* y, double d, float f, int i, unsigned char u, bool b, long long q) {}""",
                        "f", arch="sm_90")
y = ExchangeArray(0x7F0000010000, (16,))
records = []


def call(label, *args):
    before, shortcuts = last_launch()["count"], hooks.shortcut_launches(k)
    error = None
    try:
        k(1, 32, (y,) + args)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    last = last_launch()
    records.append(dict(label=label, error=error, launched=last["count"] - before,
                        shortcut=hooks.shortcut_launches(k) - shortcuts, params=last["params"]))


B = (np.float64, np.float64, np.int64, np.uint16, np.bool_, np.uint64)


def b(*values):
    return tuple(t(v) for t, v in zip(B, values))


call("python learns", 0.5, 1.5, 7, 200, True, 2**40)
call("python again", 0.25, -1.5, -7, 3, False, -2**40)
call("numpy learns", np.float32(0.1), np.float16(2.5), np.int16(-9), np.uint8(250), np.bool_(True), np.uint32(4e9))
call("numpy again", np.float32(-3.5), np.float16(-0.5), np.int16(12), np.uint8(1), np.bool_(False), np.uint32(5))
# float16 read in place at its edges: the smallest subnormal, the largest finite, infinity
call("numpy half subnormal", np.float32(1.0), np.float16(6e-8), np.int16(0), np.uint8(0), np.bool_(True), np.uint32(0))
call("numpy half max", np.float32(1.0), np.float16(-65504.0), np.int16(0), np.uint8(0), np.bool_(True), np.uint32(0))
call("numpy half inf", np.float32(1.0), np.float16(np.inf), np.int16(0), np.uint8(0), np.bool_(True), np.uint32(0))
call("wide learns", *b(1e300, 0.5, -2**31, 255, True, 2**63 - 1))
call("wide again", *b(-2.0, 3e38, 2**31 - 1, 0, False, 0))
call("wide float out of range", *b(1.0, 1e300, 1, 1, True, 1))
call("wide int out of range", *b(1.0, 1.0, 2**40, 1, True, 1))
call("wide uchar out of range", *b(1.0, 1.0, 1, 300, True, 1))
call("wide long long out of range", *b(1.0, 1.0, 1, 1, True, 2**64 - 1))
# Five more patterns (eight in all, the most a kernel learns), NumPy integers into float parameters among them;
# a ninth pattern takes the full path every time.
EXTRA = [(np.int32(-5), np.int8(3), np.int64(7), np.uint8(9), np.bool_(True), np.int8(-1)),
         (np.uint64(2**53), np.uint16(7), np.uint64(12), np.uint16(200), True, np.uint64(2**62)),
         (np.float16(-1.5), np.float32(0.25), np.int8(-128), np.int8(5), np.bool_(False), np.int16(-300)),
         (np.longlong(3), np.ulonglong(4), np.longlong(-2), np.ulonglong(255), True, np.longlong(-2**62)),
         (np.float32(1e30), np.float64(2.5), np.uint32(7), np.int32(100), False, np.int32(-7)),
         (0.5, np.float64(1.0), np.int32(1), 1, True, 1)]
for j, values in enumerate(EXTRA):
    call(f"extra {j} learns", *values)
    call(f"extra {j} again", *values)
records.append(dict(label="kinds", kinds=[list(how) for _, usable, how in hooks.kernel_shortcuts(k) if usable]))
print(json.dumps(records))
'''


def expect(d, f, i, u, b, q):
    """The parameter bytes of f(y, d, f, i, u, b, q), the padding (bytes 26 to 31) left out."""
    return (struct.pack("<Q", 0x7F0000010000) + struct.pack("<d", d) + struct.pack("<f", f) + struct.pack("<i", i)
            + struct.pack("<B?", u, b) + struct.pack("<q", q)).hex()


def params(record):
    b = bytes.fromhex(record["params"])
    assert len(b) == 40, record
    return (b[:26] + b[32:]).hex()


def test_the_shortcut_reads_numpy_scalars_as_the_full_path_does():
    r = {x["label"]: x for x in run_json_child(SHORTCUT_CHILD)}
    for label, shortcut in (("python learns", 0), ("python again", 1), ("numpy learns", 0), ("numpy again", 1),
                            ("wide learns", 0), ("wide again", 1)):
        assert r[label]["error"] is None and r[label]["launched"] == 1, r[label]
        assert r[label]["shortcut"] == shortcut, r[label]
    assert params(r["python again"]) == expect(0.25, -1.5, -7, 3, False, -2**40)
    assert params(r["numpy learns"]) == expect(float(np.float32(0.1)), 2.5, -9, 250, True, 4000000000)
    assert params(r["numpy again"]) == expect(-3.5, -0.5, 12, 1, False, 5)
    for label, half in (("numpy half subnormal", np.float16(6e-8)), ("numpy half max", np.float16(-65504.0)),
                        ("numpy half inf", np.float16(np.inf))):
        assert r[label]["error"] is None and r[label]["shortcut"] == 1, r[label]
        assert params(r[label]) == expect(1.0, float(half), 0, 0, True, 0), r[label]
    assert params(r["wide learns"]) == expect(1e300, 0.5, -2**31, 255, True, 2**63 - 1)
    assert params(r["wide again"]) == expect(-2.0, 3e38, 2**31 - 1, 0, False, 0)
    # out of range: the shortcut declines and the full path words the error (nothing launched)
    for label, words in (("wide float out of range", "OverflowError: f: argument 2 (float): 1e+300 is out of range"),
                         ("wide int out of range", "OverflowError: f: argument 3 (int): 1099511627776 does not fit"),
                         ("wide uchar out of range", "OverflowError: f: argument 4 (unsigned char): 300 does not fit"),
                         ("wide long long out of range", "OverflowError: f: argument 6 (long long): "
                                                         "18446744073709551615 does not fit")):
        assert r[label]["error"] is not None and r[label]["error"].startswith(words), r[label]
        assert r[label]["launched"] == 0 and r[label]["shortcut"] == 0, r[label]


def test_the_shortcut_reads_numpy_scalars_in_place_for_up_to_eight_patterns():
    records = run_json_child(SHORTCUT_CHILD)
    r = {x["label"]: x for x in records}
    extra = [np.int32(-5), np.int8(3), np.int64(7), np.uint8(9), np.bool_(True), np.int8(-1)], \
        [np.uint64(2**53), np.uint16(7), np.uint64(12), np.uint16(200), True, np.uint64(2**62)], \
        [np.float16(-1.5), np.float32(0.25), np.int8(-128), np.int8(5), np.bool_(False), np.int16(-300)], \
        [np.longlong(3), np.ulonglong(4), np.longlong(-2), np.ulonglong(255), True, np.longlong(-2**62)], \
        [np.float32(1e30), np.float64(2.5), np.uint32(7), np.int32(100), False, np.int32(-7)], \
        [0.5, np.float64(1.0), np.int32(1), 1, True, 1]
    for j, (d, f, i, u, b, q) in enumerate(extra):
        want = expect(float(d), float(f), int(i), int(u), bool(b), int(q))
        for step in ("learns", "again"):
            x = r[f"extra {j} {step}"]
            assert x["error"] is None and x["launched"] == 1 and params(x) == want, x
        # patterns 4 to 8 are learnt (the "again" call takes the shortcut); the ninth is not
        assert r[f"extra {j} again"]["shortcut"] == (1 if j < 5 else 0), r[f"extra {j} again"]
    kinds = r["kinds"]["kinds"]
    assert len(kinds) == 8, kinds
    # NumPy floats and integers are read in place, into float and integer parameters alike; bools by truth
    assert kinds[1] == ["exchange_array"] + ["numpy_scalar"] * 4 + ["boolean", "numpy_scalar"], kinds[1]
    assert kinds[3] == ["exchange_array"] + ["numpy_scalar"] * 4 + ["boolean", "numpy_scalar"], kinds[3]
    assert kinds[0] == ["exchange_array", "floating", "floating", "integer", "integer", "boolean", "integer"], kinds[0]
