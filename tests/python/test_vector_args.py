"""Vector and struct pointers, complex scalars, check_args=False and JAX outputs, packed against real signatures
(jitbridge_testing.pack_args; no GPU). Arrays are jitbridge.from_ptr views or CAI objects at made-up device addresses."""
import struct

import numpy as np
import pytest

import jitbridge
from gpu_frameworks import MADE_UP_ADDRESSES
from testing_hooks import hooks

pytestmark = MADE_UP_ADDRESSES

SRC = r'''
#include <cuda_fp16.h>
#include <cuComplex.h>
#include <cuda/std/complex>
struct __align__(8) Pair { float x; int y; };
extern "C" __global__ void vec(float4* a, const __half2* h, int2* i, float3* f3, uchar4* u, double2* z) {}
extern "C" __global__ void rec(Pair* p) {}
extern "C" __global__ void cplx(cuDoubleComplex z, cuFloatComplex c, cuda::std::complex<float> s,
                                cuda::std::complex<double> d, double x, float4 v) {}
extern "C" __global__ void out(float* y, const float* x) {}
'''
ADDR = 0x7F0000001000


@pytest.fixture(scope="module")
def mod():
    return jitbridge.RawModule(code=SRC, arch="sm_90")


def dev(dtype="float32", shape=(16,), addr=ADDR):
    return jitbridge.from_ptr(addr, shape, dtype, device="cuda:0")


def vec_args(**over):
    base = dict(a=dev(), h=dev("float16"), i=dev("int32"), f3=dev(shape=(12,)), u=dev("uint8"), z=dev("float64"))
    base.update(over)
    return tuple(base.values())


def test_probe_records_pointee_size_and_alignment(mod):
    params = mod.get_function("vec").signature.params
    assert [(p.pointee_size, p.pointee_align) for p in params] == [(16, 16), (4, 4), (8, 8), (12, 4), (4, 4),
                                                                     (16, 16)]
    assert mod.get_function("rec").signature.params[0].pointee_size == 8


def test_vector_pointers_take_their_scalar_dtype(mod):
    k = mod.get_function("vec")
    packed = hooks.pack_args(k, *vec_args())
    assert [struct.unpack("<Q", b)[0] for b in packed] == [ADDR] * 6
    hooks.pack_args(k, *vec_args(z=dev("complex128", shape=(3,))))  # double2* keeps complex128


@pytest.mark.parametrize("over, exc, words", [
    (dict(a=dev(shape=(10,))), ValueError, "count: 'float4*' reads 4 float32 per element; the array has 10"),
    (dict(a=dev(addr=ADDR + 8)), ValueError, "alignment"),
    (dict(a=dev("float64")), TypeError, "dtype: got a float64 array; 'float4*' takes float32"),
    (dict(h=dev("float16", shape=(3,))), ValueError, "count"),
    (dict(z=dev("complex64")), TypeError, "takes float64 or complex128"),
    (dict(f3=dev(shape=(13,))), ValueError, "count"),
])
def test_vector_pointer_failures_name_the_rule(mod, over, exc, words):
    with pytest.raises(exc) as info:
        hooks.pack_args(mod.get_function("vec"), *vec_args(**over))
    assert words in str(info.value)
    assert str(info.value).startswith("vec: argument ")


def test_structured_arrays_into_struct_pointers(mod):
    k = mod.get_function("rec")
    good = np.dtype([("x", "f4"), ("y", "i4")], align=True)
    assert good.itemsize == 8
    assert struct.unpack("<Q", hooks.pack_args(k, dev(good, shape=(4,)))[0])[0] == ADDR
    with pytest.raises(TypeError, match="size: the array's items have 5 bytes; 'Pair' has 8"):
        hooks.pack_args(k, dev(np.dtype([("x", "f4"), ("y", "i1")]), shape=(4,)))
    with pytest.raises(ValueError, match="alignment"):
        hooks.pack_args(k, dev(good, shape=(4,), addr=ADDR + 4))
    with pytest.raises(TypeError, match="structured dtype"):
        hooks.pack_args(k, dev("float32"))

    class CAI:  # CuPy exports structured arrays as typestr |V<n>
        __cuda_array_interface__ = {"shape": (4,), "typestr": "|V8", "data": (ADDR, False), "version": 3}

    hooks.pack_args(k, CAI())


def test_complex_scalars_at_the_parameter_type(mod):
    k = mod.get_function("cplx")
    v = np.zeros(4, np.float32).tobytes()
    packed = hooks.pack_args(k, 1 + 2j, np.complex64(3 - 4j), complex(5, 6), np.complex128(7 + 8j), 0.5, v)
    assert struct.unpack("<dd", packed[0]) == (1.0, 2.0)
    assert struct.unpack("<ff", packed[1]) == (3.0, -4.0)
    assert struct.unpack("<ff", packed[2]) == (5.0, 6.0)
    assert struct.unpack("<dd", packed[3]) == (7.0, 8.0)


@pytest.mark.parametrize("index, value, exc, words", [
    (0, 1.5, TypeError, "real numbers are not converted"),
    (1, 3, TypeError, "is complex and takes a complex"),
    (1, complex(1e39, 0), OverflowError, "out of range"),
    (0, np.complex64(1j), TypeError, "numpy.complex64"),
    (4, np.complex64(1j), TypeError, "is not complex"),       # was 8 raw bytes into a double
    (5, np.complex128(1j), TypeError, "is not complex"),      # was 16 raw bytes into a float4
    (4, 1j, TypeError, "is not complex"),
])
def test_complex_refusals(mod, index, value, exc, words):
    good = [1j, np.complex64(1j), 1j, 1j, 0.5, bytes(16)]
    good[index] = value
    with pytest.raises(exc) as info:
        hooks.pack_args(mod.get_function("cplx"), *good)
    assert words in str(info.value)


def test_check_args_per_kernel_and_per_call(mod):
    k = jitbridge.RawKernel(SRC, "vec", arch="sm_90", check_args=False)
    assert k.check_args is False
    hooks.pack_args(k, *vec_args(a=dev("int8", shape=(3,), addr=ADDR + 1)))  # any dtype, count and alignment
    with pytest.raises(ValueError, match="device memory"):  # host memory stays refused
        hooks.pack_args(k, *vec_args(a=jitbridge.from_ptr(ADDR, (16,), "float32", device="cpu")))
    checked = mod.get_function("vec")
    assert checked.check_args is True
    bad = vec_args(a=dev("int8"))
    with pytest.raises(TypeError, match="dtype: got a int8 array"):
        checked[1, 1](*bad, check_args=True)
    with pytest.raises(TypeError, match="dtype: got a int8 array"):
        checked(1, 1, bad)
    # Per call, both forms: the checks pass, so the launch goes on to the driver (absent on CPU
    # machines; on a GPU the empty kernel runs and never touches the made-up addresses).
    for launch in (lambda: checked[1, 1](*bad, check_args=False), lambda: checked(1, 1, bad, check_args=False)):
        try:
            launch()
        except jitbridge.NoDriverError:
            pass
    with pytest.raises(TypeError, match="dtype: got a int8 array"):  # the kernel's own setting is unchanged
        hooks.pack_args(checked, *bad)
    m = jitbridge.RawModule(code=SRC, arch="sm_90", check_args=False)
    assert m.get_function("out").check_args is False


def test_jax_arrays_are_refused_as_outputs(mod):
    JaxArray = type("ArrayImpl", (), {"__module__": "jax._src.array",
                                      "__cuda_array_interface__": {"shape": (16,), "typestr": "<f4",
                                                                   "data": (ADDR, False), "version": 3}})
    k = mod.get_function("out")
    hooks.pack_args(k, dev(), JaxArray())  # const float* takes it
    with pytest.raises(ValueError) as info:
        hooks.pack_args(k, JaxArray(), dev())
    assert str(info.value) == ("out: argument 0 (float*): JAX arrays are immutable; declare the parameter const, "
                               "or pass check_args=False")
    k.check_args = False
    try:
        hooks.pack_args(k, JaxArray(), dev())
    finally:
        k.check_args = True
