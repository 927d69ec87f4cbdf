"""RawKernel / RawModule without a GPU: construction, signatures, argument packing and every checking error.

Arrays here are jitbridge.from_ptr views of made-up device addresses: packing never dereferences them."""
import struct

import numpy as np
import pytest

import jitbridge
from gpu_frameworks import MADE_UP_ADDRESSES
from testing_hooks import hooks

pytestmark = MADE_UP_ADDRESSES

SRC = r'''
#include <cuda_fp16.h>
struct Params { double scale; int n; };
extern "C" __global__ void k(const float* a, float* b, int n, unsigned char u, bool flag, float f, double d,
                             __half h, Params p, void* raw, long long big) {}
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {}
'''
ADDR = 0x7F0000001000


@pytest.fixture(scope="module")
def k():
    return jitbridge.RawKernel(SRC, "k", arch="sm_90")


def dev(dtype="float32", shape=(16,), device="cuda:0", addr=ADDR):
    return jitbridge.from_ptr(addr, shape, dtype, device=device)


def args(**over):
    base = dict(a=dev(), b=dev(), n=5, u=200, flag=True, f=1.5, d=0.25, h=2.0,
                p=struct.pack("<di4x", 3.0, 7), raw=dev("int8"), big=1 << 40)
    base.update(over)
    return tuple(base.values())


def test_signature_and_repr(k):
    assert str(k.signature) == ("(float const*, float*, int, unsigned char, bool, float, double, __half, Params, "
                                "void*, long long)")
    assert k.name == "k"
    assert "RawKernel k(" in repr(k)
    assert k.program.arch == "sm_90"


def test_packing_writes_exact_parameter_bytes(k):
    packed = hooks.pack_args(k, *args())
    assert struct.unpack("<Q", packed[0])[0] == ADDR
    assert struct.unpack("<i", packed[2])[0] == 5
    assert packed[3] == bytes([200])
    assert packed[4] == b"\x01"
    assert struct.unpack("<f", packed[5])[0] == 1.5
    assert struct.unpack("<d", packed[6])[0] == 0.25
    assert np.frombuffer(packed[7], np.float16)[0] == 2.0
    assert packed[8] == struct.pack("<di4x", 3.0, 7)
    assert struct.unpack("<q", packed[10])[0] == 1 << 40


def test_numpy_scalars_and_structured_scalars(k):
    rec = np.zeros((), dtype=[("scale", "<f8"), ("n", "<i4"), ("pad", "V4")])[()]
    rec["scale"], rec["n"] = 9.0, 3
    packed = hooks.pack_args(k, *args(n=np.int64(9), f=np.float32(0.5), flag=np.bool_(False), p=rec))
    assert struct.unpack("<i", packed[2])[0] == 9
    assert struct.unpack("<f", packed[5])[0] == 0.5
    assert packed[4] == b"\x00"
    assert struct.unpack("<d", packed[8][:8])[0] == 9.0


def test_none_is_a_null_pointer(k):
    assert hooks.pack_args(k, *args(raw=None))[9] == b"\x00" * 8


@pytest.mark.parametrize("over, exc, words", [
    (dict(b=dev("float64")), TypeError, "got a float64 array; 'float*' takes float32"),
    (dict(a=dev("int32")), TypeError, "'float*' takes float32"),
    (dict(n=2 ** 40), OverflowError, "does not fit in 'int'"),
    (dict(n=1.5), TypeError, "'int' takes an integer"),
    (dict(u=256), OverflowError, "does not fit in 'unsigned char'"),
    (dict(u=-1), OverflowError, "does not fit"),
    (dict(flag=1), TypeError, "'bool' takes True or False"),
    (dict(f=1e300), OverflowError, "out of range for 'float'"),
    (dict(h=1e5), OverflowError, "out of range for '__half'"),
    (dict(p=b"1234"), ValueError, "got 4 bytes; 'Params' has 16"),
    (dict(p=3), TypeError, "'Params' is passed by value"),
    (dict(a=ADDR), TypeError, "jitbridge.from_ptr"),
    (dict(n=dev()), TypeError, "'int' takes a scalar"),
    (dict(big=2 ** 64), OverflowError, "does not fit"),
    (dict(f="1.0"), TypeError, "cannot pass a str"),
    (dict(b=dev(device="cpu")), ValueError, "cpu memory"),
    pytest.param(dict(b=lambda: dev(device="cuda:1")), ValueError, "all arrays must be on one device",
                 marks=pytest.mark.skipif(len(jitbridge.driver_info()["devices"]) == 1,
                                          reason="from_ptr refuses cuda:1 where the driver sees one GPU")),
])
def test_bad_arguments_are_named(k, over, exc, words):
    over = {name: value() if callable(value) else value for name, value in over.items()}
    with pytest.raises(exc) as info:
        hooks.pack_args(k, *args(**over))
    assert words in str(info.value)
    assert str(info.value).startswith("k: argument ")


def test_read_only_arrays_only_into_const_pointers(k):
    class ReadOnly:
        __cuda_array_interface__ = {"shape": (16,), "typestr": "<f4", "data": (ADDR, True), "version": 3}

    hooks.pack_args(k, *args(a=ReadOnly()))  # const float* takes it
    with pytest.raises(ValueError, match="read-only"):
        hooks.pack_args(k, *args(b=ReadOnly()))


def test_wrong_argument_count_quotes_the_signature(k):
    s = jitbridge.RawKernel(SRC, "saxpy", arch="sm_90")
    with pytest.raises(TypeError, match=r"saxpy\(float, float const\*, float\*, int\) takes 4 arguments, 3 given"):
        hooks.pack_args(s, 1.0, dev(), dev())
    with pytest.raises(TypeError, match="takes 4 arguments, 3 given"):
        s(1, 32, (1.0, dev(), dev()))


def test_launch_syntax_errors_come_before_any_gpu_work():
    s = jitbridge.RawKernel(SRC, "saxpy", arch="sm_90")
    with pytest.raises(TypeError, match="grid: expected an int or a tuple"):
        s("1", 32, (1.0, dev(), dev(), 4))
    with pytest.raises(ValueError, match="block: expected 1 to 3 dimensions"):
        s(1, (1, 1, 1, 1), (1.0, dev(), dev(), 4))
    with pytest.raises(ValueError, match="grid: x = 0 is out of range"):
        s(0, 32, (1.0, dev(), dev(), 4))
    with pytest.raises(TypeError, match="args: expected a tuple or list"):
        s(1, 32, dev())
    with pytest.raises(TypeError, match="unexpected keyword argument 'sharedmem'"):
        s(1, 32, (1.0, dev(), dev(), 4), sharedmem=4)
    with pytest.raises(TypeError, match=r"\[grid, block\]"):
        s[1]


def test_a_valid_launch_without_a_driver_says_so(gpu_absent_reason):
    s = jitbridge.RawKernel(SRC, "saxpy", arch="sm_90")
    with pytest.raises(jitbridge.NoDriverError, match="CUDA driver"):
        s(1, 32, (1.0, dev(), dev(), 4))
    with pytest.raises(jitbridge.NoDriverError):
        s[1, 32](1.0, dev(), dev(), 4)


def test_missing_kernel_lists_what_there_is():
    with pytest.raises(KeyError, match="no kernel 'nope' in the program; it has: ") as info:
        jitbridge.RawKernel(SRC, "nope", arch="sm_90")
    assert "saxpy" in str(info.value) and "k" in str(info.value)
    m = jitbridge.RawModule(code=SRC, arch="sm_90")
    assert sorted(m.kernel_names()) == ["k", "saxpy"]
    with pytest.raises(KeyError, match="no kernel 'missing' in the program; it has: "):
        m.get_function("missing")


def test_compile_errors_surface_at_construction():
    with pytest.raises(jitbridge.CompileError) as info:
        jitbridge.RawKernel('extern "C" __global__ void k(float* x) { x[0] = y; }', "k", arch="sm_90")
    assert info.value.line == 1
    assert info.value.kernel == "k"


def test_template_kernels_through_name_expressions():
    m = jitbridge.RawModule(code="template <class T> __global__ void fill(T* out, T v, int n) {}",
                            name_expressions=["fill<float>", "fill<int>"], arch="sm_90")
    f = m.get_function("fill<float>")
    assert str(f.signature) == "(float*, float, int)"
    assert m.get_function("fill<float>") is f
    i = m.get_function("fill<int>")
    with pytest.raises(TypeError, match="'int' takes an integer"):
        hooks.pack_args(i, dev("int32"), 1.5, 3)
    assert struct.unpack("<f", hooks.pack_args(f, dev(), 2.0, 3)[1])[0] == 2.0


def test_tensor_views_from_arrays():
    k = jitbridge.RawKernel('#include <jitbridge/tensor.cuh>\n'
                            'extern "C" __global__ void t(jitbridge::Tensor<const float, 2> in) {}', "t", arch="sm_90")
    view = jitbridge.from_ptr(ADDR, (3, 4), "float32", device="cuda:0", strides=(1, 3))
    data = struct.unpack("<Qqqqq", hooks.pack_args(k, view)[0])
    assert data == (ADDR, 3, 4, 1, 3)
    with pytest.raises(ValueError, match="the view has rank 2"):
        hooks.pack_args(k, dev())


def test_raw_module_argument_errors(tmp_path):
    with pytest.raises(TypeError, match="exactly one of code= and path="):
        jitbridge.RawModule()
    with pytest.raises(FileNotFoundError, match="no such file"):
        jitbridge.RawModule(path=tmp_path / "missing.cubin")
    (tmp_path / "k.txt").write_text("x")
    with pytest.raises(ValueError, match=r"\.cubin, \.ptx or \.fatbin"):
        jitbridge.RawModule(path=tmp_path / "k.txt")


def test_argument_conversion_may_launch_again(k):
    """A producer that packs (or launches) another kernel while its own array is being read must not
    disturb the outer call's arguments (each nesting level has its own scratch)."""
    saxpy = jitbridge.RawKernel(SRC, "saxpy", arch="sm_90")
    inner_results = []

    class Reentrant:
        @property
        def __cuda_array_interface__(self):
            inner_results.append(hooks.pack_args(k, *args()))   # 11 arguments: more than the outer call has
            return {"shape": (16,), "typestr": "<f4", "data": (ADDR + 4096, False), "version": 3}

    packed = hooks.pack_args(saxpy, 2.5, Reentrant(), dev(addr=ADDR + 8192), 7)
    assert struct.unpack("<f", packed[0])[0] == 2.5
    assert struct.unpack("<Q", packed[1])[0] == ADDR + 4096
    assert struct.unpack("<Q", packed[2])[0] == ADDR + 8192
    assert struct.unpack("<i", packed[3])[0] == 7
    assert inner_results and struct.unpack("<q", inner_results[0][10])[0] == 1 << 40


def test_keywords_are_read_in_both_call_forms_every_time():
    s = jitbridge.RawKernel(SRC, "saxpy", arch="sm_90")
    configured = s[1, 32]
    for _ in range(3):   # the first call of each object goes through tp_call, later ones through vectorcall
        with pytest.raises(ValueError, match="shared_mem: -1 is negative"):
            s(1, 32, (1.0, dev(), dev(), 4), shared_mem=-1)
        with pytest.raises(ValueError, match="shared_mem: -2 is negative"):
            configured(1.0, dev(), dev(), 4, stream=None, shared_mem=-2)
        with pytest.raises(TypeError, match="unexpected keyword argument 'strem'"):
            configured(1.0, dev(), dev(), 4, strem=None)
        with pytest.raises(TypeError, match="got 2 positional arguments"):
            s(1, 32)


def test_raw_kernel_calls_take_vectorcall_unless_a_subclass_overrides_call():
    have_vectorcall = 1 << 11   # Py_TPFLAGS_HAVE_VECTORCALL
    assert jitbridge.RawKernel.__flags__ & have_vectorcall

    class Counting(jitbridge.RawKernel):
        calls = 0

        def __call__(self, *args, **kwargs):
            type(self).calls += 1
            return super().__call__(*args, **kwargs)

    c = Counting(SRC, "saxpy", arch="sm_90")
    for expected in (1, 2, 3):   # the override runs every time, also after the base installed its vectorcall
        with pytest.raises(ValueError, match="shared_mem: -1 is negative"):
            c(1, 32, (1.0, dev(), dev(), 4), shared_mem=-1)
        assert Counting.calls == expected
    with pytest.raises(TypeError, match="expected a subclass"):
        jitbridge._core._inherit_vectorcall(int, jitbridge._core._Kernel)
