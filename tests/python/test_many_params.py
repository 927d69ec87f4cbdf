"""Kernels with many parameters (59 and more: probe names past the demangler's 1024 characters) compile,
and their signatures name every parameter's type, size and alignment; the parameter space's limit is a
CompileError. No GPU: compiling and packing need none (test_many_params_gpu.py launches)."""
import struct
import uuid

import pytest

import jitbridge
from testing_hooks import hooks

HEADER = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <jitbridge/tensor.cuh>
struct Params { double scale; char flag; };
struct alignas(16) Wide { float v[5]; };
template <class T, int N> struct Box { T items[N]; };
'''
# Structs with names of 96 characters, one per position: no substitution shortens them, so that a chunk
# of 16 parameters with 8 of them is too long as well, and is read one parameter at a time.
LONG = "Long_struct_{:03}_" + "y" * 80
HEADER += "namespace outer {\n" + "".join(f"struct {LONG.format(i)} {{ int tag[{i % 3 + 1}]; }};\n"
                                     for i in range(128)) + "}\n"

# Types of every kind the launch checks tell apart: scalars, pointers (const, void, vector, struct), structs by
# value (aligned, templated, namespaced), tensor views.
KINDS = {  # source -> as the signature spells it, size, alignment, pointee size
    "int": ("int", 4, 4, 0), "float*": ("float*", 8, 8, 4), "const double*": ("double const*", 8, 8, 8),
    "float4*": ("float4*", 8, 8, 16), "void*": ("void*", 8, 8, 0), "const __half*": ("__half const*", 8, 8, 2),
    "char": ("char", 1, 1, 0), "short": ("short", 2, 2, 0), "unsigned long long": ("unsigned long long", 8, 8, 0),
    "double": ("double", 8, 8, 0), "bool": ("bool", 1, 1, 0), "Params": ("Params", 16, 8, 0),
    "Wide": ("Wide", 32, 16, 0), "Box<float, 3>": ("Box<float, 3>", 12, 4, 0),
    "Box<__nv_bfloat16, 2>*": ("Box<__nv_bfloat16, 2>*", 8, 8, 4),
    "jitbridge::Tensor<float, 2>": ("jitbridge::Tensor<float, 2>", 40, 8, 0),
    "jitbridge::Tensor<const __nv_bfloat16, 3>": ("jitbridge::Tensor<__nv_bfloat16 const, 3>", 56, 8, 0),
    "__half": ("__half", 2, 2, 0), "long long": ("long long", 8, 8, 0), "Params*": ("Params*", 8, 8, 16)}
def mixed_types(n):
    """n parameter types, with what the signature should say of each (as KINDS)."""
    kinds = list(KINDS)
    types = []
    for i in range(n):
        if i % 2 == 1:
            name = "outer::" + LONG.format(i)
            types.append((name, (name, 4 * (i % 3 + 1), 4, 0)))
        else:
            kind = kinds[(i // 2 * 7) % len(kinds)]
            types.append((kind, KINDS[kind]))
    return types


def kernel_source(name, types):
    params = ", ".join(f"{t} a{i}" for i, t in enumerate(types))
    return f'extern "C" __global__ void {name}({params}) {{}}\n'


def fields(param):
    return (param.kind, param.type, param.spelling, param.is_const, param.size, param.align, param.pointee_size,
            param.pointee_align, param.dtype, param.lanes, param.rank, param.element_const)


def unique(source):
    """`source` with a comment that makes it a cache miss."""
    return f"// {uuid.uuid4()}\n{source}"


@pytest.mark.parametrize("n", [58, 59, 64, 100, 256])
def test_int_parameters(n):
    k = jitbridge.RawKernel(unique(kernel_source("k", ["int"] * n)), "k", arch="sm_90")
    sig = k.signature
    assert len(sig) == n
    assert [(p.kind, p.type, p.spelling, p.size, p.align) for p in sig] == [("value", "int", "int", 4, 4)] * n
    assert str(sig) == "(" + ", ".join(["int"] * n) + ")"
    values = [(i * 7919 - 1_000_000) * (-1) ** i for i in range(n)]
    assert hooks.pack_args(k, *values) == [struct.pack("<i", v) for v in values]
    with pytest.raises(TypeError, match=rf"takes {n} arguments, {n - 1} given"):
        hooks.pack_args(k, *values[:-1])


def test_mixed_parameters_match_the_same_types_probed_alone():
    """~80 parameters of every kind: each reads as expected, and as it does in a one-parameter kernel (the
    whole probe's path), down to the dtype, lanes and rank the launch checks take from it."""
    mixed = mixed_types(80)
    types = [t for t, _ in mixed]
    singles = "".join(kernel_source(f"one{i}", [t]) for i, t in enumerate(types))
    p = jitbridge.compile(unique(HEADER + kernel_source("many", types) + singles), arch="sm_90")
    sig = p.kernel("many").signature
    assert [(q.spelling, q.size, q.align, q.pointee_size) for q in sig] == [want for _, want in mixed]
    for i, param in enumerate(sig):
        alone = p.kernel(f"one{i}").signature
        assert len(alone) == 1
        assert fields(param) == fields(alone[0]), (i, types[i])
    assert len(set(types) & set(KINDS)) == len(KINDS)  # every kind is there


def test_raw_module_and_template_name_expressions():
    mixed = mixed_types(100)
    source = HEADER + kernel_source("first", [t for t, _ in mixed]) + (
        "template <class T> __global__ void tk(" + ", ".join(f"T* a{i}, int n{i}" for i in range(50)) + ") {}\n")
    m = jitbridge.RawModule(code=unique(source), name_expressions=["tk<double>", "tk<Params>"], arch="sm_90")
    first = m.get_function("first")
    assert [(q.spelling, q.size, q.align, q.pointee_size) for q in first.signature] == [want for _, want in mixed]
    for name, pointee, size in [("tk<double>", "double", 8), ("tk<Params>", "Params", 16)]:
        sig = m.get_function(name).signature
        assert len(sig) == 100
        assert [(q.kind, q.type, q.pointee_size) for q in sig[0::2]] == [("pointer", pointee, size)] * 50
        assert [q.spelling for q in sig[1::2]] == ["int"] * 50


def test_kernels_declared_through_macros():
    """Kernels the scan cannot see are probed in a compile of their own, by parts when their names are long."""
    source = ('#define KERNEL(name, T) extern "C" __global__ void name('
              + ", ".join(f"T a{i}" for i in range(120)) + ") {}\nKERNEL(floats, float*)\nKERNEL(halves, __half)\n")
    p = jitbridge.compile(unique("#include <cuda_fp16.h>\n" + source), arch="sm_90")
    assert [(q.kind, q.type, q.size) for q in p.kernel("floats").signature] == [("pointer", "float", 8)] * 120
    assert [(q.kind, q.type, q.size) for q in p.kernel("halves").signature] == [("value", "__half", 2)] * 120


def test_a_type_too_long_to_demangle_leaves_that_kernel_without_a_signature():
    """A parameter type whose mangled name alone passes 1024 characters: the kernel compiles, unsigned (its
    arguments then go by the binary's parameter sizes, as a .cubin's kernels do); the others keep theirs."""
    name = "S" + "x" * 1100
    p = jitbridge.compile(unique(f"struct {name} {{ int v; }};\n" + kernel_source("long_type", [name, "int"])
                                 + kernel_source("plain", ["float*", "int"])
                                 + f"template <class T> __global__ void tk(T* p, int n) {{}}\n"
                                   f"template __global__ void tk<{name}>({name}*, int);\n"),
                          arch="sm_90")
    assert p.kernel("long_type").signature is None
    assert str(p.kernel("plain").signature) == "(float*, int)"
    # An instance the scan cannot name, whose own symbol is too long to demangle: no signature, not "()".
    [instance] = [k for k in p.kernels if k.name not in ("long_type", "plain")]
    assert instance.name.startswith("_Z2tkI1101Sxxx") and instance.signature is None


def test_parameter_space_limit():
    """32764 bytes of parameters compile (CUDA 12.1+ on Volta and later); 4 more is NVRTC's precise error."""
    k = jitbridge.RawKernel(unique(kernel_source("k", ["int"] * 8191)), "k", arch="sm_90")
    assert len(k.signature) == 8191 and sum(q.size for q in k.signature) == 32764
    for source in [kernel_source("k", ["int"] * 8192), "struct Big { char b[32768]; };\n" + kernel_source("k", ["Big"])]:
        with pytest.raises(jitbridge.CompileError,
                           match=r"Formal parameter space overflowed \(32768 bytes required, max 32764 bytes "
                                 r"allowed\) in function k") as info:
            jitbridge.compile(unique(source), arch="sm_90")
        # Located in the user's source (unique() adds a first line), so no compile without the probe follows.
        assert (info.value.line, info.value.kernel) == (source.count("\n") + 1, "k")
