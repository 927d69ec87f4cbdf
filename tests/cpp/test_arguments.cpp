// test_arguments.cpp — argument packing and every checking error, against real compiled signatures and hostile synthetic ones (no GPU needed).
#include <catch2/catch.hpp>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "jitbridge/arguments.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/vector_types.hpp"

#include <fmt/format.h>

using namespace jitbridge;

namespace {

const Signature& signature_of(const char* source, const char* kernel) {
  static Cache cache(CacheConfig{false, "", 1 << 20});
  CompileOptions o;
  o.arch = "sm_90";
  static std::vector<std::shared_ptr<const Program>> keep;
  keep.push_back(compile(source, o, &cache));
  const Kernel* k = keep.back()->find_kernel(kernel);
  REQUIRE(k);
  REQUIRE(k->signature);
  return *k->signature;
}

const char* const kSource = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
struct Params { double scale; int n; };
extern "C" __global__ void k(const float* a, float* b, int n, unsigned char u, bool flag, float f, double d,
                             __half h, __nv_bfloat16 bf, Params p, void* raw, long long big) {}
)";

ArrayView device_array(const char* dtype, bool readonly = false, int device = 0) {
  ArrayView v;
  v.data = reinterpret_cast<void*>(0x7f0000001000);
  v.device = {kDLCUDA, device};
  v.dtype = *dtype_from_name(dtype);
  std::int64_t shape[1] = {16};
  v.shape.assign(shape, 1);
  v.strides = contiguous_strides(v.shape);
  v.readonly = readonly;
  return v;
}

ArgValue array(const ArrayView& v) { return ArgValue{ArgValue::Kind::array, &v}; }
ArgValue integer(std::int64_t i) {
  ArgValue v{ArgValue::Kind::signed_integer};
  v.i = i;
  v.python_type = "int";
  return v;
}
ArgValue real(double f) {
  ArgValue v{ArgValue::Kind::floating};
  v.f = f;
  v.python_type = "float";
  return v;
}
ArgValue boolean(bool b) {
  ArgValue v{ArgValue::Kind::boolean};
  v.i = b;
  v.python_type = "bool";
  return v;
}
ArgValue bytes(const void* p, std::size_t n) {
  ArgValue v{ArgValue::Kind::bytes};
  v.data = p;
  v.size = n;
  return v;
}

// Packs one argument into position `i` and returns the bytes written.
std::string pack_one(const Signature& sig, std::size_t i, const ArgValue& v, PackResult* where = nullptr) {
  ArgBuffer buf;
  buf.reset(sig);
  PackResult local;
  pack_argument("k", sig, i, v, buf, where ? *where : local);
  return std::string(static_cast<const char*>(buf.pointers()[i]), sig.params[i].size);
}

template <class T>
T as(const std::string& b) {
  T v;
  REQUIRE(b.size() == sizeof(T));
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}

ArgumentError::Kind error_kind(const Signature& sig, std::size_t i, const ArgValue& v) {
  try {
    pack_one(sig, i, v);
  } catch (const ArgumentError& e) {
    return e.kind();
  }
  FAIL("no ArgumentError");
  return ArgumentError::Kind::value;
}

}  // namespace

TEST_CASE("packing writes each parameter as the kernel declares it") {
  const Signature& sig = signature_of(kSource, "k");
  REQUIRE(sig.params.size() == 12);
  ArrayView a = device_array("float32", true), b = device_array("float32");
  CHECK(as<void*>(pack_one(sig, 0, array(a))) == a.ptr());
  CHECK(as<void*>(pack_one(sig, 1, array(b))) == b.ptr());
  CHECK(as<std::int32_t>(pack_one(sig, 2, integer(-7))) == -7);
  CHECK(as<std::uint8_t>(pack_one(sig, 3, integer(255))) == 255);
  CHECK(as<std::uint8_t>(pack_one(sig, 4, boolean(true))) == 1);
  CHECK(as<float>(pack_one(sig, 5, real(1.5))) == 1.5f);
  CHECK(as<float>(pack_one(sig, 5, integer(3))) == 3.0f);  // ints go into float parameters
  CHECK(as<double>(pack_one(sig, 6, real(0.1))) == 0.1);
  CHECK(__half2float(as<__half>(pack_one(sig, 7, real(2.5)))) == 2.5f);
  CHECK(as<std::uint16_t>(pack_one(sig, 8, real(1.0))) == 0x3f80);  // bfloat16 1.0
  struct { double scale; int n; int pad; } params{2.0, 5, 0};
  CHECK(pack_one(sig, 9, bytes(&params, 16)) == std::string(reinterpret_cast<char*>(&params), 16));
  ArrayView any = device_array("int8");
  CHECK(as<void*>(pack_one(sig, 10, array(any))) == any.ptr());  // void* takes any dtype
  CHECK(as<void*>(pack_one(sig, 10, ArgValue{ArgValue::Kind::null_pointer})) == nullptr);
  CHECK(as<std::int64_t>(pack_one(sig, 11, integer(1ll << 40))) == (1ll << 40));
}

TEST_CASE("a whole packing is the kernel's parameter space: each parameter at its offset, used() its end") {
  const Signature& sig = signature_of(kSource, "k");
  ArrayView a = device_array("float32", true), b = device_array("float32"), any = device_array("int8");
  struct { double scale; int n; int pad; } params{2.0, 5, 0};
  const ArgValue values[12] = {array(a),     array(b),   integer(-7),         integer(200), boolean(true), real(1.5),
                               real(0.25),   real(2.5),  real(1.0),           bytes(&params, 16), array(any),
                               integer(1ll << 40)};
  ArgBuffer buf;
  buf.reset(sig);
  PackResult where;
  for (std::size_t i = 0; i < 12; ++i) pack_argument("k", sig, i, values[i], buf, where);
  CHECK(buf.param_space());
  const std::vector<std::size_t> offsets = param_offsets(sig);
  // The C layout of these types: two pointers, int, uchar, bool, float (at 24), double (at 32), two
  // 2-byte halves, the 16-byte struct (at 48), a pointer, a long long.
  CHECK(offsets == std::vector<std::size_t>{0, 8, 16, 20, 21, 24, 32, 40, 42, 48, 64, 72});
  CHECK(buf.used() == 80);
  for (std::size_t i = 0; i < 12; ++i) {
    INFO("parameter " << i);
    CHECK(static_cast<const unsigned char*>(buf.pointers()[i]) == buf.bytes() + offsets[i]);
  }
  CHECK(as<std::int32_t>(std::string(reinterpret_cast<const char*>(buf.bytes()) + 16, 4)) == -7);

  ArgBuffer unchecked;
  unchecked.reset(std::vector<std::size_t>{8, 4});
  CHECK_FALSE(unchecked.param_space());  // reached through pointers() only
}

TEST_CASE("packing refuses what does not fit, naming kernel, argument and reason") {
  const Signature& sig = signature_of(kSource, "k");
  ArrayView f32 = device_array("float32"), f64 = device_array("float64"), ro = device_array("float32", true);
  CHECK(error_kind(sig, 1, array(f64)) == ArgumentError::Kind::type);
  CHECK_THROWS_WITH(pack_one(sig, 1, array(f64)),
                    Catch::Contains("k: argument 1 (float*)") && Catch::Contains("got a float64 array; 'float*' takes float32"));
  CHECK(error_kind(sig, 1, array(ro)) == ArgumentError::Kind::value);
  CHECK_THROWS_WITH(pack_one(sig, 1, array(ro)), Catch::Contains("read-only"));
  CHECK(error_kind(sig, 2, integer(1ll << 40)) == ArgumentError::Kind::overflow);
  CHECK_THROWS_WITH(pack_one(sig, 2, integer(1ll << 40)), Catch::Contains("1099511627776 does not fit in 'int'"));
  CHECK(error_kind(sig, 2, real(1.5)) == ArgumentError::Kind::type);
  CHECK(error_kind(sig, 3, integer(256)) == ArgumentError::Kind::overflow);
  CHECK(error_kind(sig, 3, integer(-1)) == ArgumentError::Kind::overflow);
  CHECK(error_kind(sig, 4, integer(1)) == ArgumentError::Kind::type);
  CHECK(error_kind(sig, 5, real(1e300)) == ArgumentError::Kind::overflow);
  CHECK(error_kind(sig, 7, real(70000.0)) == ArgumentError::Kind::overflow);
  CHECK(error_kind(sig, 0, integer(0x1000)) == ArgumentError::Kind::type);  // an int is not a pointer
  CHECK_THROWS_WITH(pack_one(sig, 0, integer(0x1000)), Catch::Contains("jitbridge.from_ptr"));
  CHECK(error_kind(sig, 2, array(f32)) == ArgumentError::Kind::type);
  int four = 4;
  CHECK(error_kind(sig, 9, bytes(&four, 4)) == ArgumentError::Kind::value);
  CHECK(error_kind(sig, 9, integer(1)) == ArgumentError::Kind::type);
  CHECK_THROWS_WITH(pack_one(sig, 9, integer(1)), Catch::Contains("'Params' is passed by value"));
}

TEST_CASE("packing refuses host memory and arrays on different devices") {
  const Signature& sig = signature_of(kSource, "k");
  ArrayView host = device_array("float32");
  host.device = {kDLCPU, 0};
  CHECK_THROWS_WITH(pack_one(sig, 1, array(host)), Catch::Contains("cpu memory"));
  ArrayView on0 = device_array("float32", false, 0), on1 = device_array("float32", false, 1);
  ArgBuffer buf;
  buf.reset(sig);
  PackResult where;
  pack_argument("k", sig, 0, array(on0), buf, where);
  CHECK(where.device == 0);
  CHECK_THROWS_WITH(pack_argument("k", sig, 1, array(on1), buf, where),
                    Catch::Contains("on cuda:1 but argument 0 is on cuda:0"));
}

TEST_CASE("arity messages quote the signature") {
  const Signature& sig = signature_of("extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n) {}",
                                      "saxpy");
  CHECK(arity_message("saxpy", sig, 3) == "saxpy(float, float const*, float*, int) takes 4 arguments, 3 given");
}

TEST_CASE("tensor views are filled from arrays") {
  const char* src = R"(
namespace jitbridge { template <class T, int N> struct Tensor { T* data; long long shape[N]; long long strides[N]; }; }
extern "C" __global__ void t(jitbridge::Tensor<const float, 2> in, jitbridge::Tensor<float, 2> out) {}
)";
  const Signature& sig = signature_of(src, "t");
  REQUIRE(sig.params.size() == 2);
  CHECK(sig.params[0].size == 40);
  ArrayView v = device_array("float32", true);
  std::int64_t shape[2] = {3, 4}, strides[2] = {1, 3};
  v.shape.assign(shape, 2);
  v.strides.assign(strides, 2);
  std::string packed = pack_one(sig, 0, array(v));
  std::int64_t got[5];
  std::memcpy(got, packed.data(), 40);
  CHECK(reinterpret_cast<void*>(got[0]) == v.ptr());
  CHECK(got[1] == 3);
  CHECK(got[2] == 4);
  CHECK(got[3] == 1);
  CHECK(got[4] == 3);
  CHECK_THROWS_WITH(pack_one(sig, 1, array(v)), Catch::Contains("read-only"));
  ArrayView one_d = device_array("float32");
  CHECK_THROWS_WITH(pack_one(sig, 1, array(one_d)), Catch::Contains("got a 1-d array; the view has rank 2"));
}

TEST_CASE("pointee types map to dtypes") {
  CHECK(dtype_name(*dtype_for_pointee("__half")) == "float16");
  CHECK(dtype_name(*dtype_for_pointee("__nv_bfloat16")) == "bfloat16");
  CHECK(dtype_name(*dtype_for_pointee("unsigned long long")) == "uint64");
  CHECK(dtype_name(*dtype_for_pointee("float2")) == "complex64");
  CHECK_FALSE(dtype_for_pointee("void"));
  CHECK_FALSE(dtype_for_pointee("Params"));
}

TEST_CASE("jitbridge/tensor.cuh is provided to NVRTC and its views are packed") {
  const char* src = R"(
#include <jitbridge/tensor.cuh>
extern "C" __global__ void transpose(jitbridge::Tensor<const float, 2> in, jitbridge::Tensor<float, 2> out) {
  long long i = blockIdx.x, j = threadIdx.x;
  if (i < in.shape[0] && j < in.shape[1]) out(j, i) = in(i, j) + in.flat(0) * 0.0f;
})";
  const Signature& sig = signature_of(src, "transpose");
  CHECK(sig.to_string() == "(jitbridge::Tensor<float const, 2>, jitbridge::Tensor<float, 2>)");
  ArrayView v = device_array("float32");
  std::int64_t shape[2] = {2, 8}, strides[2] = {8, 1};
  v.shape.assign(shape, 2);
  v.strides.assign(strides, 2);
  std::string packed = pack_one(sig, 1, array(v));
  std::int64_t got[5];
  std::memcpy(got, packed.data(), 40);
  CHECK(got[1] == 2);
  CHECK(got[4] == 1);
  ArrayView wrong = device_array("float64");
  wrong.shape.assign(shape, 2);
  wrong.strides.assign(strides, 2);
  CHECK_THROWS_WITH(pack_one(sig, 1, array(wrong)), Catch::Contains("'float*' takes float32"));
}

// ---- hostile layouts: sizes, offsets and alignments at their limits -----------------------------

namespace {

Param param(Param::Kind kind, const char* type, std::size_t size, std::size_t align, const char* spelling) {
  Param p;
  p.kind = kind;
  p.type = type;
  p.size = size;
  p.align = align;
  p.spelling = spelling;
  return p;
}
Param by_value(std::size_t size, std::size_t align) { return param(Param::Kind::value, "Big", size, align, "Big"); }
Signature signature(std::vector<Param> params) { return Signature{std::move(params)}; }

ArgumentError::Kind reset_error(const Signature& sig) {
  try {
    ArgBuffer buf;
    buf.reset(sig);
  } catch (const ArgumentError& e) {
    return e.kind();
  }
  FAIL("no ArgumentError");
  return ArgumentError::Kind::type;
}

}  // namespace

TEST_CASE("parameter layouts past CUDA's limit are refused before anything is sized from them") {
  const std::size_t huge[] = {SIZE_MAX, SIZE_MAX - 3, std::size_t{1} << 62, kMaxParamBytes + 1};
  for (std::size_t size : huge) {
    INFO("size " << size);
    // Used to wrap the buffer's total to a few bytes and then write past it.
    const Signature sig = signature({param(Param::Kind::value, "int", 4, 4, "int"), by_value(size, 8)});
    CHECK(reset_error(sig) == ArgumentError::Kind::value);
    CHECK_THROWS_WITH(param_offsets(sig), Catch::Contains("(int, Big): parameter 1 (Big, ") &&
                                              Catch::Contains("ends past the 32764 bytes"));
  }
  // Alignments whose rounding overflows.
  CHECK(reset_error(signature({by_value(1, 1), by_value(1, std::size_t{1} << 63)})) == ArgumentError::Kind::value);
  CHECK(reset_error(signature({by_value(1, 1), by_value(1, SIZE_MAX)})) == ArgumentError::Kind::value);
  // Up to the limit exactly: fine.
  CHECK(param_offsets(signature({by_value(kMaxParamBytes, 1)})) == std::vector<std::size_t>{0});
  CHECK(param_offsets(signature({by_value(1, 1), by_value(kMaxParamBytes - 4, 4)})) == std::vector<std::size_t>{0, 4});
  CHECK(reset_error(signature({by_value(1, 1), by_value(kMaxParamBytes - 3, 4)})) == ArgumentError::Kind::value);
  // The driver's sizes (kernels without a signature) obey the same limit.
  ArgBuffer buf;
  CHECK_THROWS_AS(buf.reset(std::vector<std::size_t>{8, SIZE_MAX}), ArgumentError);
  CHECK_THROWS_AS(buf.reset(std::vector<std::size_t>{8, kMaxParamBytes - 7}), ArgumentError);
  CHECK_NOTHROW(buf.reset(std::vector<std::size_t>{8, kMaxParamBytes - 8}));
  CHECK_THROWS_AS(buf.slot(2, 1, 1), std::logic_error);  // past reset()'s count: never written
}

TEST_CASE("a signature whose size disagrees with the value written is refused, never written past") {
  const Signature sig = signature({param(Param::Kind::value, "int", 2, 2, "int"),
                                   param(Param::Kind::pointer, "float", 4, 4, "float*"),
                                   param(Param::Kind::value, "double", 4, 4, "double"),
                                   param(Param::Kind::value, "bool", 0, 1, "bool")});
  ArrayView f = device_array("float32");
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("parameter " << i);
    const ArgValue values[] = {integer(5), array(f), real(0.5), boolean(true)};
    CHECK(error_kind(sig, i, values[i]) == ArgumentError::Kind::type);
  }
  CHECK_THROWS_WITH(pack_one(sig, 0, integer(5)),
                    Catch::Contains("the signature gives the parameter 2 bytes but its value takes 4"));
  CHECK(error_kind(sig, 1, ArgValue{ArgValue::Kind::null_pointer}) == ArgumentError::Kind::type);
  // By-value bytes of the wrong length, none at all included.
  const Signature s16 = signature({by_value(16, 8)});
  char raw[17] = {};
  CHECK(error_kind(s16, 0, bytes(raw, 17)) == ArgumentError::Kind::value);
  CHECK(error_kind(s16, 0, bytes(nullptr, 0)) == ArgumentError::Kind::value);
  CHECK(pack_one(s16, 0, bytes(raw, 16)) == std::string(16, '\0'));
}

TEST_CASE("pack_unchecked: a float beyond float's range is an OverflowError, not a conversion") {
  ArgBuffer buf;
  buf.reset(std::vector<std::size_t>{4, 8, 4});
  PackResult where;
  try {
    pack_unchecked(0, 4, real(1e300), buf, where);
    FAIL("1e300 packed into 4 bytes");
  } catch (const ArgumentError& e) {
    CHECK(e.kind() == ArgumentError::Kind::overflow);
    CHECK_THAT(e.what(), Catch::Contains("out of range for a 4-byte float"));
  }
  buf.reset(std::vector<std::size_t>{4, 8, 4});
  pack_unchecked(0, 4, real(-1.5), buf, where);
  pack_unchecked(1, 8, real(1e300), buf, where);
  pack_unchecked(2, 4, real(std::numeric_limits<double>::infinity()), buf, where);
  CHECK(as<float>(std::string(static_cast<const char*>(buf.pointers()[0]), 4)) == -1.5f);
  CHECK(as<double>(std::string(static_cast<const char*>(buf.pointers()[1]), 8)) == 1e300);
  CHECK(std::isinf(as<float>(std::string(static_cast<const char*>(buf.pointers()[2]), 4))));
}

TEST_CASE("tensor view ranks are parsed without overflow; fit checks hold at 0 bytes") {
  auto kind_of_type = [](const char* type) {
    return plan_signature(signature({param(Param::Kind::value, type, 8, 8, type)}))[0];
  };
  CHECK(kind_of_type("jitbridge::Tensor<float, 2>").kind == ParamPlan::Kind::tensor_view);
  CHECK(kind_of_type("jitbridge::Tensor<float, 2>").rank == 2);
  CHECK(kind_of_type("jitbridge::Tensor<float,3>").rank == 3);
  // Used to go through atoi (undefined past int's range).
  CHECK(kind_of_type("jitbridge::Tensor<float, 99999999999999999999>").kind == ParamPlan::Kind::by_value);
  CHECK(kind_of_type("jitbridge::Tensor<float, 2x>").kind == ParamPlan::Kind::by_value);
  CHECK(kind_of_type("jitbridge::Tensor<float, -1>").kind == ParamPlan::Kind::by_value);
  CHECK(kind_of_type("jitbridge::Tensor<float, >").kind == ParamPlan::Kind::by_value);
  CHECK(signed_fits(0, 0));
  CHECK_FALSE(signed_fits(1, 0));
  CHECK_FALSE(signed_fits(-1, 0));
  CHECK(unsigned_fits(0, 0));
  CHECK_FALSE(unsigned_fits(1, 0));
  CHECK(signed_fits(-128, 1));
  CHECK_FALSE(signed_fits(128, 1));
}

namespace {

ArrayView array_at(const char* dtype, std::int64_t n, std::uintptr_t address) {
  ArrayView v = device_array(dtype);
  v.data = reinterpret_cast<void*>(address);
  std::int64_t shape[1] = {n};
  v.shape.assign(shape, 1);
  v.strides = contiguous_strides(v.shape);
  return v;
}

ArgValue complex_value(double re, double im, bool single = false) {
  ArgValue v{ArgValue::Kind::complex};
  v.f = re;
  v.im = im;
  v.complex_single = single;
  v.python_type = single ? "numpy.complex64" : "complex";
  return v;
}

const char* const kVectorSource = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuComplex.h>
#include <cuda/std/complex>
struct __align__(16) Big { float v[3]; };
struct Incomplete;
extern "C" __global__ void v(float2* a, float3* b, float4* c, double2* d, int2* e, int4* f, uint2* g, uint4* h,
    char2* i, char4* j, uchar2* k, uchar4* l, short2* m, short4* n, ushort2* o, long2* p, longlong2* q,
    ulonglong2* r, __half2* s, half2* t, __nv_bfloat162* u, nv_bfloat162* w, double4_16a* x, double4_32a* y,
    longlong4_32a* z, const float4* cz, Big* big, Incomplete* inc) {}
extern "C" __global__ void c(cuComplex a, cuFloatComplex b, cuDoubleComplex d, cuda::std::complex<float> e,
                             cuda::std::complex<double> f, float2 g, double2 h, double x, float4 y) {}
)";

}  // namespace

TEST_CASE("vector pointers take arrays of their scalar dtype in whole vectors, aligned (real probe signatures)") {
  const Signature& sig = signature_of(kVectorSource, "v");
  struct Want {
    const char* scalar;
    int lanes;
    std::size_t align;
  };
  const Want want[] = {{"float32", 2, 8},  {"float32", 3, 4},  {"float32", 4, 16}, {"float64", 2, 16},
                       {"int32", 2, 8},    {"int32", 4, 16},   {"uint32", 2, 8},   {"uint32", 4, 16},
                       {"int8", 2, 2},     {"int8", 4, 4},     {"uint8", 2, 2},    {"uint8", 4, 4},
                       {"int16", 2, 4},    {"int16", 4, 8},    {"uint16", 2, 4},   {"int64", 2, 16},
                       {"int64", 2, 16},   {"uint64", 2, 16},  {"float16", 2, 4},  {"float16", 2, 4},
                       {"bfloat16", 2, 4}, {"bfloat16", 2, 4}, {"float64", 4, 16}, {"float64", 4, 32},
                       {"int64", 4, 32},   {"float32", 4, 16}};
  REQUIRE(sig.params.size() == std::size(want) + 2);
  const std::uintptr_t base = 0x7f0000000000;  // aligned to everything
  for (std::size_t i = 0; i < std::size(want); ++i) {
    const Param& p = sig.params[i];
    CAPTURE(p.spelling);
    CHECK(p.pointee_align == want[i].align);
    CHECK(p.pointee_size == itemsize(*dtype_from_name(want[i].scalar)) * static_cast<std::size_t>(want[i].lanes));
    ArrayView ok = array_at(want[i].scalar, 12 * want[i].lanes, base);
    CHECK(as<void*>(pack_one(sig, i, array(ok))) == ok.ptr());
    // count: one element short of whole vectors
    ArrayView short_by_one = array_at(want[i].scalar, 12 * want[i].lanes - 1, base);
    CHECK_THROWS_WITH(pack_one(sig, i, array(short_by_one)),
                      Catch::Contains(fmt::format("argument {} ({})", i, p.spelling)) && Catch::Contains("count: '") &&
                          Catch::Contains(fmt::format("reads {} {} per element", want[i].lanes, want[i].scalar)));
    // alignment: an address one scalar past an aligned one (when that breaks the vector's alignment)
    const std::size_t step = itemsize(*dtype_from_name(want[i].scalar));
    if (want[i].align > step) {
      ArrayView off = array_at(want[i].scalar, 12 * want[i].lanes, base + step);
      CHECK(error_kind(sig, i, array(off)) == ArgumentError::Kind::value);
      CHECK_THROWS_WITH(pack_one(sig, i, array(off)),
                        Catch::Contains("alignment: ") && Catch::Contains(fmt::format("not {}-byte aligned", want[i].align)));
    }
    // dtype: another scalar type is refused by name
    ArrayView wrong = array_at(want[i].scalar[0] == 'b' ? "float32" : "bool", 12 * want[i].lanes, base);
    CHECK(error_kind(sig, i, array(wrong)) == ArgumentError::Kind::type);
    CHECK_THROWS_WITH(pack_one(sig, i, array(wrong)), Catch::Contains("dtype: got a "));
  }
  // float2* and double2* (cuComplex) keep taking complex arrays, of any count.
  CHECK_NOTHROW(pack_one(sig, 0, array(array_at("complex64", 5, base))));
  CHECK_NOTHROW(pack_one(sig, 3, array(array_at("complex128", 5, base))));
  CHECK(error_kind(sig, 2, array(array_at("complex64", 8, base))) == ArgumentError::Kind::type);
  // A DLPack vector dtype (float32x4) is a whole float4 per element.
  ArrayView lanes4 = array_at("float32", 3, base);
  lanes4.dtype.lanes = 4;
  CHECK_NOTHROW(pack_one(sig, 2, array(lanes4)));
  // Read-only arrays only into the const one.
  ArrayView ro = array_at("float32", 8, base);
  ro.readonly = true;
  CHECK_NOTHROW(pack_one(sig, 25, array(ro)));
  CHECK_THROWS_WITH(pack_one(sig, 2, array(ro)), Catch::Contains("read-only"));
}

TEST_CASE("struct pointers take structured arrays of the struct's size and alignment") {
  const Signature& sig = signature_of(kVectorSource, "v");
  const std::size_t big = sig.params.size() - 2, inc = sig.params.size() - 1;
  CHECK(sig.params[big].pointee_size == 16);
  CHECK(sig.params[big].pointee_align == 16);
  CHECK(sig.params[inc].pointee_size == 0);  // incomplete: no size
  const std::uintptr_t base = 0x7f0000000000;
  ArrayView good = array_at("float32", 4, base);
  good.dtype = opaque_bytes(16);
  CHECK(dtype_name(good.dtype) == "void128");
  CHECK(as<void*>(pack_one(sig, big, array(good))) == good.ptr());
  ArrayView small = good;
  small.dtype = opaque_bytes(12);  // the packed (align=False) layout of the same fields
  CHECK(error_kind(sig, big, array(small)) == ArgumentError::Kind::type);
  CHECK_THROWS_WITH(pack_one(sig, big, array(small)),
                    Catch::Contains("size: the array's items have 12 bytes; 'Big' has 16"));
  ArrayView off = array_at("float32", 4, base + 8);
  off.dtype = opaque_bytes(16);
  CHECK_THROWS_WITH(pack_one(sig, big, array(off)), Catch::Contains("alignment: ") && Catch::Contains("16-byte"));
  CHECK_THROWS_WITH(pack_one(sig, big, array(array_at("float32", 4, base))),
                    Catch::Contains("dtype: got a float32 array") && Catch::Contains("structured dtype of 16 bytes"));
  CHECK_THROWS_WITH(pack_one(sig, inc, array(good)), Catch::Contains("declare it void*"));
}

TEST_CASE("check_args=False: any array into any pointer; device memory and one device still required") {
  const Signature& sig = signature_of(kVectorSource, "v");
  const std::vector<ParamPlan> plan = unchecked_plan(plan_signature(sig));
  ArgBuffer buf;
  buf.reset(sig);
  PackResult where;
  ArrayView odd = array_at("int8", 3, 0x7f0000000001);
  odd.readonly = true;
  CHECK_NOTHROW(pack_argument("v", sig, plan, 0, array(odd), buf, where));
  ArrayView host = array_at("float32", 8, 0x7f0000000000);
  host.device = {kDLCPU, 0};
  CHECK_THROWS_WITH(pack_argument("v", sig, plan, 1, array(host), buf, where), Catch::Contains("device memory"));
  ArrayView other = array_at("float32", 8, 0x7f0000000000);
  other.device = {kDLCUDA, 1};
  CHECK_THROWS_WITH(pack_argument("v", sig, plan, 1, array(other), buf, where), Catch::Contains("one device"));
}

TEST_CASE("complex values pack at the parameter's exact type, real part first") {
  const Signature& sig = signature_of(kVectorSource, "c");
  REQUIRE(sig.params.size() == 9);
  for (std::size_t i : {0, 1, 3, 5}) {  // the float forms (the probe prints cuComplex as float2)
    CAPTURE(sig.params[i].spelling);
    const std::string b = pack_one(sig, i, complex_value(1.5, -2.25));
    float parts[2];
    std::memcpy(parts, b.data(), 8);
    CHECK(parts[0] == 1.5f);
    CHECK(parts[1] == -2.25f);
    CHECK(pack_one(sig, i, complex_value(3, 4, true)).size() == 8);
    CHECK(error_kind(sig, i, complex_value(1e39, 0)) == ArgumentError::Kind::overflow);
    CHECK(error_kind(sig, i, complex_value(0, -1e39)) == ArgumentError::Kind::overflow);
    CHECK_NOTHROW(pack_one(sig, i, complex_value(INFINITY, NAN)));
  }
  for (std::size_t i : {2, 4, 6}) {  // the double forms
    CAPTURE(sig.params[i].spelling);
    const std::string b = pack_one(sig, i, complex_value(1e300, 0.1));
    double parts[2];
    std::memcpy(parts, b.data(), 16);
    CHECK(parts[0] == 1e300);
    CHECK(parts[1] == 0.1);
    CHECK_THROWS_WITH(pack_one(sig, i, complex_value(1, 2, true)), Catch::Contains("numpy.complex64"));
  }
  CHECK_THROWS_WITH(pack_one(sig, 2, real(1.0)), Catch::Contains("real numbers are not converted"));
  CHECK(error_kind(sig, 2, integer(1)) == ArgumentError::Kind::type);
  CHECK_THROWS_WITH(pack_one(sig, 7, complex_value(1, 2)), Catch::Contains("is not complex"));
  CHECK_THROWS_WITH(pack_one(sig, 8, complex_value(1, 2)), Catch::Contains("is not complex"));
  CHECK(complex_bits("cuda::std::__4::complex<float>") == 64);
  CHECK(complex_bits("thrust::complex<double>") == 128);
  CHECK(complex_bits("thrust::detail::complex<int>") == 0);
  CHECK(complex_bits("my::complex<float>") == 0);
}

TEST_CASE("vector type names") {
  CHECK(vector_type("float4")->lanes == 4);
  CHECK(dtype_name(vector_type("ulonglong2")->scalar) == "uint64");
  CHECK(dtype_name(vector_type("__nv_bfloat162")->scalar) == "bfloat16");
  CHECK(vector_type("double4_32a")->lanes == 4);
  CHECK_FALSE(vector_type("float4_32a"));  // only 8-byte scalars have the aligned forms
  CHECK_FALSE(vector_type("float5"));
  CHECK_FALSE(vector_type("float"));
  CHECK_FALSE(vector_type("4"));
  CHECK_FALSE(vector_type(""));
  CHECK_FALSE(vector_type("_32a"));
}
