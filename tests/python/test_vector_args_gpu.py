"""Vector, struct and complex parameters on the GPU (issue 14): float4 and __half2 loads on torch and CuPy arrays,
a CuPy structured array into a struct*, complex axpy with Python and NumPy complex scalars, JAX arrays refused as
outputs, and check_args=False passing what the checks refuse.

Inputs are fresh random data, outputs are poisoned before each launch and compared with a reference."""
import numpy as np
import pytest

import jitbridge
from gpu_frameworks import need_cupy, need_jax, need_torch

pytestmark = pytest.mark.gpu

VECTOR = r'''
#include <cuda_fp16.h>
extern "C" __global__ void scale4(const float4* x, float4* y, float a, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) { float4 v = x[i]; y[i] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w); }
}
extern "C" __global__ void copy4(const float4* x, float4* y, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) y[i] = x[i];
}
extern "C" __global__ void hadd2(const __half2* a, const __half2* b, __half2* c, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) c[i] = __hadd2(a[i], b[i]);
}
'''
STRUCT = r'''
struct __align__(8) Item { float x; int n; };
extern "C" __global__ void update(Item* items, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) { items[i].x = 2.0f * items[i].x + 1.0f; items[i].n = 3 * items[i].n + i; }
}
'''
COMPLEX = r'''
#include <cuComplex.h>
#include <cuda/std/complex>
extern "C" __global__ void zaxpy(cuDoubleComplex a, const cuDoubleComplex* x, cuDoubleComplex* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = cuCadd(cuCmul(a, x[i]), y[i]);
}
extern "C" __global__ void caxpy(cuda::std::complex<float> a, const cuda::std::complex<float>* x,
                                 cuda::std::complex<float>* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
'''
COPY = r'''
extern "C" __global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
'''


@pytest.fixture(scope="module")
def vec():
    return jitbridge.RawModule(code=VECTOR)


def blocks(n, threads=256):
    return (n + threads - 1) // threads


def test_float4_loads_on_torch(gpu, vec):
    torch = need_torch()
    n4 = 10_007
    x = torch.randn(4 * n4, device="cuda")
    y = torch.full_like(x, float("nan"))
    vec.get_function("scale4")(blocks(n4), 256, (x, y, 1.75, n4))
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 1.75 * x)
    # The rules, each named: a view one float in (4-byte aligned, not 16), and a count that is no
    # whole number of float4.
    with pytest.raises(ValueError, match="alignment: .* not 16-byte aligned"):
        vec.get_function("scale4")(blocks(n4), 256, (x[1:-3], y[:-4], 1.0, n4 - 1))
    with pytest.raises(ValueError, match="count: 'float4\\*' reads 4 float32 per element; the array has 10"):
        vec.get_function("scale4")(1, 32, (x[:10], y, 1.0, 2))
    with pytest.raises(TypeError, match="dtype: got a float64 array"):
        vec.get_function("scale4")(1, 32, (x.double(), y, 1.0, 2))


def test_float4_loads_on_cupy(gpu, vec):
    cp = need_cupy()
    n4 = 4099
    x = cp.asarray(np.random.default_rng().standard_normal(4 * n4, dtype=np.float32))
    y = cp.full(4 * n4, np.nan, dtype=cp.float32)
    vec.get_function("scale4")(blocks(n4), 256, (x, y, -0.5, n4))
    np.testing.assert_allclose(cp.asnumpy(y), -0.5 * cp.asnumpy(x), rtol=1e-6)
    # A 2-d array counts all its elements.
    x2 = x[:4 * 64].reshape(64, 4)
    y2 = cp.full((64, 4), np.nan, dtype=cp.float32)
    vec.get_function("copy4")(1, 64, (x2, y2, 64))
    np.testing.assert_array_equal(cp.asnumpy(y2), cp.asnumpy(x2))


def test_half2_adds(gpu, vec):
    torch = need_torch()
    n2 = 5_003
    a = torch.randn(2 * n2, device="cuda", dtype=torch.float16)
    b = torch.randn(2 * n2, device="cuda", dtype=torch.float16)
    c = torch.full_like(a, float("nan"))
    vec.get_function("hadd2")(blocks(n2), 256, (a, b, c, n2))
    torch.cuda.synchronize()
    # __hadd2 rounds the sum once; the reference rounds to float first (at most one half ulp apart).
    torch.testing.assert_close(c, (a.float() + b.float()).half())
    with pytest.raises(ValueError, match="count"):
        vec.get_function("hadd2")(1, 32, (a[:3], b, c, 1))


def test_cupy_structured_array_into_a_struct_pointer(gpu):
    cp = need_cupy()
    dt = np.dtype([("x", "f4"), ("n", "i4")], align=True)
    rng = np.random.default_rng()
    count = 3_001
    host = np.empty(count, dt)
    host["x"] = rng.standard_normal(count, dtype=np.float32)
    host["n"] = rng.integers(-1000, 1000, count, dtype=np.int32)
    try:
        items = cp.asarray(host)
    except Exception as e:  # noqa: BLE001 (a CuPy without structured arrays)
        pytest.skip(f"CuPy cannot hold this structured array: {e}")
    update = jitbridge.RawKernel(STRUCT, "update")
    update(blocks(count), 256, (items, count))
    got = cp.asnumpy(items)
    np.testing.assert_array_equal(got["x"], 2.0 * host["x"] + 1.0)
    np.testing.assert_array_equal(got["n"], 3 * host["n"] + np.arange(count, dtype=np.int32))
    packed = cp.asarray(np.zeros(4, np.dtype([("x", "f4"), ("n", "i1")])))  # 5 bytes: no C layout
    with pytest.raises(TypeError, match="size: the array's items have 5 bytes; 'Item' has 8"):
        update(1, 32, (packed, 4))


@pytest.mark.parametrize("a", [1.5 - 0.25j, np.complex128(-0.75 + 2j)])
def test_complex_axpy_cudoublecomplex(gpu, a):
    torch = need_torch()
    n = 20_011
    x = torch.randn(n, device="cuda", dtype=torch.complex128)
    y0 = torch.randn(n, device="cuda", dtype=torch.complex128)
    y = y0.clone()
    jitbridge.RawKernel(COMPLEX, "zaxpy")(blocks(n), 256, (a, x, y, n))
    torch.cuda.synchronize()
    torch.testing.assert_close(y, complex(a) * x + y0)


@pytest.mark.parametrize("a", [0.5 + 1.25j, np.complex64(-2 + 0.5j), np.complex128(3 - 1j)])
def test_complex_axpy_cuda_std_complex_float(gpu, a):
    cp = need_cupy()
    rng = np.random.default_rng()
    n = 9_973
    hx = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    hy = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    x, y = cp.asarray(hx), cp.asarray(hy)
    k = jitbridge.RawKernel(COMPLEX, "caxpy")
    k(blocks(n), 256, (a, x, y, n))
    np.testing.assert_allclose(cp.asnumpy(y), np.complex64(a) * hx + hy, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="real numbers are not converted"):
        k(blocks(n), 256, (2.0, x, y, n))


def test_jax_array_refused_as_output_unless_opted_out(gpu):
    jax, jnp = need_jax()
    n = 4096
    hx = np.random.default_rng().standard_normal(n, dtype=np.float32)
    x = jnp.asarray(hx)
    y = jnp.asarray(np.full(n, np.nan, np.float32))
    x.block_until_ready()
    y.block_until_ready()
    copy = jitbridge.RawKernel(COPY, "copy")
    with pytest.raises(ValueError, match="argument 1 \\(float\\*\\): JAX arrays are immutable; declare the "
                                         "parameter const, or pass check_args=False"):
        copy(blocks(n), 256, (x, y, n))
    out = jitbridge.empty((n,), "float32")
    copy(blocks(n), 256, (x, out, n))  # into const float*: fine
    jitbridge.synchronize()
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(out)), hx)
    copy(blocks(n), 256, (x, y, n), check_args=False)  # the user knows better
    jitbridge.synchronize()
    np.testing.assert_array_equal(np.asarray(y), hx)


def test_check_args_false_passes_what_the_checks_refuse(gpu, vec):
    torch = need_torch()
    n4 = 1000
    x = torch.randint(-2**31, 2**31 - 1, (4 * n4,), device="cuda", dtype=torch.int32)
    y = torch.full_like(x, -1)
    copy4 = vec.get_function("copy4")
    with pytest.raises(TypeError, match="dtype: got a int32 array"):
        copy4(blocks(n4), 256, (x, y, n4))
    copy4(blocks(n4), 256, (x, y, n4), check_args=False)  # float4 copies move the bits
    torch.cuda.synchronize()
    assert torch.equal(y, x)
    y.fill_(-1)
    unchecked = jitbridge.RawKernel(VECTOR, "copy4", check_args=False)
    unchecked[blocks(n4), 256](x, y, n4)
    unchecked[blocks(n4), 256](x, y, n4)  # again, through the shortcut learnt without checks
    torch.cuda.synchronize()
    assert torch.equal(y, x)
    with pytest.raises(ValueError, match="device memory"):  # host memory stays refused
        unchecked[1, 32](x.cpu(), y, 1)
