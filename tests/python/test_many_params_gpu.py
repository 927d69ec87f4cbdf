"""On a GPU: kernels with many parameters (test_many_params.py compiles them) get every argument, in order, up to
the 32764 bytes of parameter space CUDA 12.1+ gives Volta and later.

Each kernel writes each parameter it got into a poisoned output; the arguments are fresh random values, and the
output is compared with them."""
import struct

import numpy as np
import pytest

import jitbridge

pytestmark = pytest.mark.gpu

PREAMBLE = "struct Pair { int a; double b; };\n"
# (C type, how the kernel turns parameter `a` into a double, how to draw a value, the double it should give)
KINDS = [
    ("int", "(double)a", lambda r: int(r.integers(-2**31, 2**31)), float),
    ("float", "(double)a", lambda r: float(np.float32(r.normal() * 1e3)), float),
    ("double", "a", lambda r: float(r.normal() * 1e9), float),
    ("long long", "(double)a", lambda r: int(r.integers(-2**52, 2**52)), float),
    ("short", "(double)a", lambda r: int(r.integers(-2**15, 2**15)), float),
    ("unsigned char", "(double)a", lambda r: int(r.integers(0, 256)), float),
    ("bool", "a ? 1.0 : -1.0", lambda r: bool(r.integers(0, 2)), lambda v: 1.0 if v else -1.0),
    ("Pair", "(double)a.a * 1e6 + a.b", lambda r: (int(r.integers(-1000, 1000)), float(r.integers(0, 10**5))),
     lambda v: v[0] * 1e6 + v[1]),
    ("const float*", "(double)a[0]", None, None),  # a one-element array of its own
]


def record_kernel(types):
    """A kernel `record(double* out, t0 a0, ...)` writing out[i] from parameter a_i."""
    params = ", ".join(f"{t} a{i}" for i, (t, _, _, _) in enumerate(types))
    body = "\n".join(f"  {{ auto& a = a{i}; out[{i}] = {expr}; }}" for i, (_, expr, _, _) in enumerate(types))
    return PREAMBLE + f'extern "C" __global__ void record(double* out, {params}) {{\n{body}\n}}\n'


def launch_and_read(kernel, n, args):
    out = jitbridge.asarray(np.full(n, np.nan))  # poison
    kernel(1, 1, (out, *args))
    return np.from_dlpack(out, device="cpu")


def test_100_mixed_parameters_arrive(gpu):
    rng = np.random.default_rng()
    types = [KINDS[(i * 5) % len(KINDS)] for i in range(99)]  # + out: 100 parameters
    k = jitbridge.RawKernel(record_kernel(types), "record")
    assert len(k.signature) == 100
    args, want, keep = [], [], []
    for t, _, draw, expect in types:
        if draw is None:
            value = np.float32(rng.normal() * 1e3)
            array = jitbridge.asarray(np.array([value], np.float32))
            keep.append(array)
            args.append(array)
            want.append(float(value))
        elif t == "Pair":
            a, b = draw(rng)
            args.append(struct.pack("<i4xd", a, b))
            want.append(expect((a, b)))
        else:
            value = draw(rng)
            args.append(value)
            want.append(expect(value))
    got = launch_and_read(k, len(types), args)
    np.testing.assert_array_equal(got, np.array(want))


@pytest.mark.parametrize("n", [59, 256, 8191])
def test_int_parameters_arrive(gpu, n):
    """8191 ints: 32764 bytes, the whole parameter space (with the output pointer: one int less)."""
    count = n - 2 if n == 8191 else n  # 8 bytes of pointer + 8189 ints end at 32764
    types = [KINDS[0]] * count
    k = jitbridge.RawKernel(record_kernel(types), "record")
    assert len(k.signature) == count + 1
    values = [int(v) for v in np.random.default_rng().integers(-2**31, 2**31, count)]
    got = launch_and_read(k, count, values)
    np.testing.assert_array_equal(got, np.array(values, dtype=np.float64))
