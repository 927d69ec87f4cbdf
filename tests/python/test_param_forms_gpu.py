"""Kernel parameters on the GPU in both forms the launches hand the driver (docs/DESIGN.md, "Which form reaches the
driver"): kernelParams (pointers into the packed parameter space: the Python full path, the shortcut, the C
interface's fast path) and one buffer (the C interface's fast path past kMaxParamPointers = 32 parameters). The
kernels copy every parameter they received into an output; parameters after padding (char then double, a struct
with inner padding, short then float) must arrive whole. Fresh random values each call; outputs poisoned before each
launch and compared with what was sent."""
import ctypes
import random
import struct

import pytest

import jitbridge
from c_api_ctypes import OK, Args, P, config, message, table
from gpu_frameworks import need_torch
from testing_hooks import hooks

pytestmark = pytest.mark.gpu

PADDED = r'''
struct Pair { char c; double d; };
extern "C" __global__ void padded(char a, double b, const float* x, Pair s, short t, float f, double* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[0] = a; out[1] = b; out[2] = x[3]; out[3] = s.c; out[4] = s.d; out[5] = t; out[6] = f;
  }
}'''

MANY = 40  # past kMaxParamPointers (32)
MANY_SRC = ('extern "C" __global__ void many(float* out' + "".join(f", int p{i}" for i in range(MANY)) + ") {\n"
            "  if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
            + "".join(f"    out[{i}] = (float)p{i};\n" for i in range(MANY)) + "  }\n}\n")


def test_padded_parameters_arrive_whole_on_the_full_path_and_the_shortcut(gpu):
    torch = need_torch()
    k = jitbridge.RawKernel(PADDED, "padded")
    shortcut_before = hooks.shortcut_launches(k)
    for call in range(4):  # the first call takes the full path, the later ones the shortcut
        a, c, t = random.randint(-128, 127), random.randint(-128, 127), random.randint(-32768, 32767)
        b, d = random.uniform(-1e6, 1e6), random.uniform(-1e6, 1e6)
        f = struct.unpack("<f", struct.pack("<f", random.uniform(-1e3, 1e3)))[0]  # a float32 value, exact in double
        x = torch.randn(8, device="cuda")
        out = torch.full((7,), float("nan"), dtype=torch.float64, device="cuda")
        pair = struct.pack("<b7xd", c, d)  # Pair: char, 7 bytes of padding, double
        k(1, 32, (a, b, x, pair, t, f, out))
        want = [a, b, float(x[3]), c, d, t, f]
        assert out.tolist() == want, (call, out.tolist(), want)  # exact: every value is a double's
    assert hooks.shortcut_launches(k) - shortcut_before == 3


def test_past_the_pointer_bound_python_and_the_c_interface_deliver_every_parameter(gpu):
    torch = need_torch()
    raw = jitbridge.RawKernel(MANY_SRC, "many")
    for _ in range(2):  # the full path (ArgBuffer pointers; past the shortcut's 32 arguments every time)
        values = [random.randint(-(1 << 20), 1 << 20) for _ in range(MANY)]
        out = torch.full((MANY,), float("nan"), device="cuda")
        raw(1, 32, (out, *values))
        assert out.tolist() == [float(v) for v in values]
    t = table()
    k = P()
    assert t.kernel_from_python(raw, ctypes.byref(k)) == OK, message(t)
    try:
        f = P()
        assert t.kernel_resolve(k, 0, ctypes.byref(f)) == OK, message(t)
        for _ in range(2):  # the C interface's fast path: one buffer past 32 parameters
            values = [random.randint(-(1 << 20), 1 << 20) for _ in range(MANY)]
            out = torch.full((MANY,), float("nan"), device="cuda")
            args = Args((out.data_ptr(), MANY, False), *values)
            c = config(1, 32, stream=torch.cuda.current_stream().cuda_stream)
            assert t.launch(f, ctypes.byref(c), args.array, MANY + 1, 0) == OK, message(t)
            torch.cuda.current_stream().synchronize()
            assert out.tolist() == [float(v) for v in values]
    finally:
        t.kernel_release(k)
