"""Which form the Python launches hand the driver their parameters in (docs/DESIGN.md, "Which form reaches the
driver"), on the fake driver of tests/fuzz/fake_cuda, which rebuilds a kernelParams launch's parameter space from the
cubin's parameter info: the full path and the shortcut pass kernelParams, and the driver gets the bytes the buffer
form gives (jitbridge_testing.raw_launch_batch(buffer_form=True) sends RawKernel._pack's), padding included, for a
signature with padding between parameters and inside a struct."""
import random
import struct

from fake_driver import LAUNCH_PRELUDE, run_json_child

CHILD = LAUNCH_PRELUDE + r'''
import json, struct
import jitbridge
import jitbridge_testing as hooks

k = jitbridge.RawKernel(r"""
struct Pair { char c; double d; };
extern "C" __global__ void padded(char a, double b, const float* x, Pair s, short t, float f, double* out) {}""",
                        "padded", arch="sm_90")
a, b, c, d, t, f = VALUES   # the test's random values, written in by the test
x, out = ExchangeArray(0x7F0000010000, (8,)), ExchangeArray(0x7F0000020000, (7,), dtype="float64")
args = (a, b, x, struct.pack("<b7xd", c, d), t, f, out)
records = []
for _ in range(2):   # the full path, then the shortcut
    before = hooks.shortcut_launches(k)
    k(1, 32, args)
    records.append(dict(last_launch(), shortcut=hooks.shortcut_launches(k) - before))
hooks.raw_launch_batch(k, 1, 32, args, 1, buffer_form=True)
records.append(last_launch())
print(json.dumps(records))
'''


def test_full_path_and_shortcut_pass_kernel_params_with_the_buffer_forms_bytes():
    a, c, t = random.randint(-128, 127), random.randint(-128, 127), random.randint(-32768, 32767)
    b, d = random.uniform(-1e6, 1e6), random.uniform(-1e6, 1e6)
    f = struct.unpack("<f", struct.pack("<f", random.uniform(-1e3, 1e3)))[0]
    code = CHILD.replace("VALUES", repr((a, b, c, d, t, f)))
    full, shortcut, buffer = run_json_child(code)
    # padded(char @0, double @8, const float* @16, Pair @24 (char, 7 bytes of padding, double), short @40, float @44,
    # double* @48): 56 bytes, every gap zero
    want = (struct.pack("<b7xdQ", a, b, 0x7F0000010000) + struct.pack("<b7xd", c, d)
            + struct.pack("<h2xfQ", t, f, 0x7F0000020000)).hex()
    assert full["pointer_form"] and not full["buffer_form"] and full["shortcut"] == 0
    assert shortcut["pointer_form"] and not shortcut["buffer_form"] and shortcut["shortcut"] == 1
    assert buffer["buffer_form"] and not buffer["pointer_form"]
    assert full["params"] == want and shortcut["params"] == want and buffer["params"] == want
