// test_c_api.cpp — the C interface (jitbridge/c_api.h) with no interpreter, on the fake driver of tests/fuzz/fake_cuda:
// resolve, signature reads, checked launches (good and bad arguments), allocation, errors and versions.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "c_api_support.hpp"
#include "jitbridge/c_api.h"

extern "C" int c_launch_one(jitbridge_kernel* kernel, void* x, int n);
extern "C" int c_check_versions(char* why_major, char* why_minor, std::size_t size);

using jitbridge_test::c_api;
using jitbridge_test::message;
using jitbridge_test::last_launch;

namespace {

const char* const kSource = R"(
#include <cuda_fp16.h>
#include <jitbridge/tensor.cuh>
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void views(jitbridge::Tensor<const __half, 2> t, float4* v, unsigned char c) {}
extern "C" __global__ void scale(float* x, int n) {}
)";

// A kernel of kSource, owned by the test (released at scope exit).
struct Kernel {
  jitbridge_kernel* k = nullptr;
  explicit Kernel(const char* name) {
    jitbridge_source s{};
    s.struct_size = sizeof s;
    s.source = kSource;
    const int rc = c_api().kernel_from_source(&s, name, &k);
    INFO(message());
    REQUIRE(rc == JITBRIDGE_OK);
    REQUIRE(k);
  }
  ~Kernel() { c_api().kernel_release(k); }
};

jitbridge_arg array(void* data, std::uint8_t code, std::uint8_t bits, const std::int64_t* shape, int ndim,
                    int device = 0, bool readonly = false) {
  jitbridge_arg a{};
  a.kind = JITBRIDGE_ARG_ARRAY;
  a.array.data = data;
  a.array.device_type = 2;
  a.array.device_id = device;
  a.array.dtype_code = code;
  a.array.dtype_bits = bits;
  a.array.dtype_lanes = 1;
  a.array.ndim = ndim;
  a.array.shape = shape;
  a.array.readonly = readonly ? 1 : 0;
  return a;
}
jitbridge_arg number(int kind, double f, std::int64_t i = 0) {
  jitbridge_arg a{};
  a.kind = kind;
  a.f = f;
  a.i = i;
  return a;
}

jitbridge_launch_config config(unsigned grid, unsigned block) {
  jitbridge_launch_config c{};
  c.struct_size = sizeof c;
  c.grid[0] = grid;
  c.grid[1] = c.grid[2] = 1;
  c.block[0] = block;
  c.block[1] = c.block[2] = 1;
  return c;
}


}  // namespace

TEST_CASE("c_api: the table's version fields, and a consumer of another version refused with the reason") {
  const JitbridgeCApi& t = c_api();
  CHECK(t.major == JITBRIDGE_C_API_MAJOR);
  CHECK(t.minor == JITBRIDGE_C_API_MINOR);
  CHECK(t.struct_size == sizeof(JitbridgeCApi));
  char why[256] = "";
  CHECK(jitbridge_c_api_get(JITBRIDGE_C_API_MAJOR + 1, 0, why, sizeof why) == nullptr);
  CHECK_THAT(why, Catch::Contains("built against version 2.0") && Catch::Contains("a different major version"));
  char why_major[256] = "", why_minor[256] = "";
  CHECK(c_check_versions(why_major, why_minor, sizeof why_major) == 1);
  CHECK_THAT(why_major, Catch::Contains("different major version"));
  CHECK_THAT(why_minor, Catch::Contains("provides only 1.1"));
  jitbridge_kernel* none = nullptr;
  CHECK(t.kernel_from_python(nullptr, &none) == JITBRIDGE_ERROR_UNSUPPORTED);
  CHECK(none == nullptr);
}

TEST_CASE("c_api: a kernel's signature: kinds, dtypes, lanes, ranks") {
  Kernel saxpy("saxpy"), views("views");
  const char* name = nullptr;
  std::int64_t count = 0;
  REQUIRE(c_api().kernel_info(saxpy.k, &name, &count) == JITBRIDGE_OK);
  CHECK(std::string(name) == "saxpy");
  CHECK(count == 4);
  jitbridge_param p{};
  p.struct_size = sizeof p;
  REQUIRE(c_api().kernel_param(saxpy.k, 0, &p) == JITBRIDGE_OK);
  CHECK(p.kind == JITBRIDGE_PARAM_SCALAR);
  CHECK((p.has_dtype && p.dtype_code == 2 && p.dtype_bits == 32));
  REQUIRE(c_api().kernel_param(saxpy.k, 1, &p) == JITBRIDGE_OK);
  CHECK(p.kind == JITBRIDGE_PARAM_POINTER);
  CHECK((p.is_const == 1 && p.dtype_code == 2 && p.dtype_bits == 32 && p.lanes == 1 && p.size == 8));
  CHECK(std::string(p.spelling) == "float const*");
  REQUIRE(c_api().kernel_param(saxpy.k, 3, &p) == JITBRIDGE_OK);
  CHECK((p.kind == JITBRIDGE_PARAM_SCALAR && p.dtype_code == 0 && p.dtype_bits == 32));

  REQUIRE(c_api().kernel_param(views.k, 0, &p) == JITBRIDGE_OK);
  CHECK((p.kind == JITBRIDGE_PARAM_TENSOR && p.rank == 2 && p.is_const == 1));
  CHECK((p.has_dtype && p.dtype_code == 2 && p.dtype_bits == 16));  // __half: float16
  REQUIRE(c_api().kernel_param(views.k, 1, &p) == JITBRIDGE_OK);
  CHECK((p.kind == JITBRIDGE_PARAM_POINTER && p.lanes == 4 && p.dtype_code == 2 && p.dtype_bits == 32));
  REQUIRE(c_api().kernel_param(views.k, 2, &p) == JITBRIDGE_OK);
  CHECK((p.kind == JITBRIDGE_PARAM_SCALAR && p.dtype_code == 1 && p.dtype_bits == 8));

  CHECK(c_api().kernel_param(views.k, 3, &p) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("index 3 is out of range") && Catch::Contains("has 3 parameters"));
  p.struct_size = 4;
  CHECK(c_api().kernel_param(views.k, 0, &p) == JITBRIDGE_ERROR_VERSION);
}

TEST_CASE("c_api: a missing kernel or bad source is an error code with the reason, never a throw") {
  jitbridge_source s{};
  s.struct_size = sizeof s;
  s.source = kSource;
  jitbridge_kernel* k = nullptr;
  CHECK(c_api().kernel_from_source(&s, "nope", &k) == JITBRIDGE_ERROR_NOT_FOUND);
  CHECK(k == nullptr);
  CHECK_THAT(message(), Catch::Contains("saxpy"));
  s.source = "extern \"C\" __global__ void broken( { }";
  CHECK(c_api().kernel_from_source(&s, "broken", &k) == JITBRIDGE_ERROR_COMPILE);
  CHECK_THAT(message(), Catch::Contains("error"));
  CHECK(c_api().kernel_from_source(nullptr, "x", &k) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("source is NULL"));
}

TEST_CASE("c_api: resolve and launch with checked arguments; the driver gets the packed parameters") {
  Kernel saxpy("saxpy");
  jitbridge_function* f = nullptr;
  REQUIRE(c_api().kernel_resolve(saxpy.k, 0, &f) == JITBRIDGE_OK);
  jitbridge_function* again = nullptr;
  REQUIRE(c_api().kernel_resolve(saxpy.k, 0, &again) == JITBRIDGE_OK);
  CHECK(again == f);

  std::uint64_t x = 0, y = 0;
  REQUIRE(c_api().mem_alloc(0, 4096, nullptr, &x) == JITBRIDGE_OK);
  REQUIRE(c_api().mem_alloc(0, 4096, nullptr, &y) == JITBRIDGE_OK);
  CHECK(x != 0);
  CHECK(y != x);
  const std::int64_t shape[1] = {1000};
  jitbridge_arg args[4] = {number(JITBRIDGE_ARG_FLOAT, 2.5), array(reinterpret_cast<void*>(x), 2, 32, shape, 1, 0, true),
                           array(reinterpret_cast<void*>(y), 2, 32, shape, 1), number(JITBRIDGE_ARG_INT, 0, 1000)};
  const jitbridge_launch_config c = config(8, 128);
  const std::uint64_t before = last_launch().count;
  REQUIRE(c_api().launch(f, &c, args, 4, 0) == JITBRIDGE_OK);
  const FakeCudaLaunch l = last_launch();
  CHECK(l.count == before + 1);
  CHECK((l.grid[0] == 8 && l.block[0] == 128));
  const jitbridge_test::SaxpyParams p = jitbridge_test::saxpy_params(l);
  CHECK(p.a == 2.5f);
  CHECK(p.x == x);
  CHECK(p.y == y);
  CHECK(p.n == 1000);
  // The plan's acceptors pack that call; a C int64 for `a` is left to the full path (pack_values), which converts
  // it. Both give the driver the same bytes.
  jitbridge_arg accepted[4] = {number(JITBRIDGE_ARG_FLOAT, 2.0), args[1], args[2], args[3]};
  jitbridge_arg full[4] = {number(JITBRIDGE_ARG_INT, 0, 2), args[1], args[2], args[3]};
  REQUIRE(c_api().launch(f, &c, accepted, 4, 0) == JITBRIDGE_OK);
  const FakeCudaLaunch la = last_launch();
  REQUIRE(c_api().launch(f, &c, full, 4, 0) == JITBRIDGE_OK);
  const FakeCudaLaunch lf = last_launch();
  CHECK(lf.count == before + 3);
  // Every form is kernelParams now (the fast path's stack array; the full path's ArgBuffer pointers).
  CHECK((l.pointer_form == 1 && la.pointer_form == 1 && lf.pointer_form == 1));
  CHECK((l.buffer_form == 0 && la.buffer_form == 0 && lf.buffer_form == 0));
  CHECK(jitbridge_test::saxpy_params(lf).a == 2.0f);
  REQUIRE(lf.param_bytes == la.param_bytes);
  CHECK(std::memcmp(lf.params, la.params, la.param_bytes) == 0);

  CHECK(c_api().mem_free(0, x, nullptr) == JITBRIDGE_OK);
  CHECK(c_api().mem_free(0, y, nullptr) == JITBRIDGE_OK);
  std::uint64_t none = 1;
  CHECK(c_api().mem_alloc(0, 0, nullptr, &none) == JITBRIDGE_OK);
  CHECK(none == 0);
}

TEST_CASE("c_api: past kMaxParamPointers parameters the fast path passes one buffer, the full path pointers, alike") {
  // many(float a, int p0, ..., int p39): more parameters than a launch passes as a stack array of pointers.
  constexpr int kMany = 40;  // past kMaxParamPointers (32); kernels past 58 parameters do not compile (the probe name does not demangle)
  std::string source = "extern \"C\" __global__ void many(float a";
  for (int i = 0; i < kMany; ++i) source += ", int p" + std::to_string(i);
  source += ") {}";
  jitbridge_source s{};
  s.struct_size = sizeof s;
  s.source = source.c_str();
  jitbridge_kernel* k = nullptr;
  REQUIRE(c_api().kernel_from_source(&s, "many", &k) == JITBRIDGE_OK);
  jitbridge_function* f = nullptr;
  REQUIRE(c_api().kernel_resolve(k, 0, &f) == JITBRIDGE_OK);
  jitbridge_arg args[kMany + 1];
  unsigned char want[4 + 4 * kMany];
  const float a = 0.25f;
  std::memcpy(want, &a, 4);
  args[0] = number(JITBRIDGE_ARG_FLOAT, a);
  for (int i = 0; i < kMany; ++i) {
    const int v = 1000 - 13 * i;
    args[i + 1] = number(JITBRIDGE_ARG_INT, 0, v);
    std::memcpy(want + 4 + 4 * i, &v, 4);
  }
  const jitbridge_launch_config c = config(1, 32);
  REQUIRE(c_api().launch(f, &c, args, kMany + 1, 0) == JITBRIDGE_OK);  // the plan's acceptors take every value
  const FakeCudaLaunch fast = last_launch();
  CHECK((fast.buffer_form == 1 && fast.pointer_form == 0));
  REQUIRE(fast.param_bytes == sizeof want);
  CHECK(std::memcmp(fast.params, want, sizeof want) == 0);
  args[0] = number(JITBRIDGE_ARG_INT, 0, 0);  // an integer for `a`: the full path converts it
  std::memset(want, 0, 4);
  REQUIRE(c_api().launch(f, &c, args, kMany + 1, 0) == JITBRIDGE_OK);
  const FakeCudaLaunch full = last_launch();
  CHECK((full.buffer_form == 0 && full.pointer_form == 1));
  REQUIRE(full.param_bytes == sizeof want);
  CHECK(std::memcmp(full.params, want, sizeof want) == 0);
  c_api().kernel_release(k);
}

TEST_CASE("c_api: the fast path's buffer form passes the padding between parameters as zeros") {
  // gaps(char c0, int p0, ..., char c19, int p19): 40 parameters (the buffer form), 3 bytes of padding after each
  // char (ParamLayout::padded: the space is zeroed before packing). A launch of ones(long long q0, ..., q19) first
  // leaves 0xFF bytes where the launch's stack space lies, so a space packed without zeroing would pass them.
  constexpr int kPairs = 20;
  std::string gaps_source = "extern \"C\" __global__ void gaps(", ones_source = "extern \"C\" __global__ void ones(";
  for (int i = 0; i < kPairs; ++i) {
    gaps_source += std::string(i ? ", " : "") + "char c" + std::to_string(i) + ", int p" + std::to_string(i);
    ones_source += std::string(i ? ", " : "") + "long long q" + std::to_string(i);
  }
  gaps_source += ") {}";
  ones_source += ") {}";
  auto resolve = [](const std::string& source, const char* name, jitbridge_kernel*& k) {
    jitbridge_source s{};
    s.struct_size = sizeof s;
    s.source = source.c_str();
    REQUIRE(c_api().kernel_from_source(&s, name, &k) == JITBRIDGE_OK);
    jitbridge_function* f = nullptr;
    REQUIRE(c_api().kernel_resolve(k, 0, &f) == JITBRIDGE_OK);
    return f;
  };
  jitbridge_kernel *kg = nullptr, *km = nullptr;
  jitbridge_function* fg = resolve(gaps_source, "gaps", kg);
  jitbridge_function* fm = resolve(ones_source, "ones", km);
  const jitbridge_launch_config c = config(1, 32);
  jitbridge_arg ones[kPairs];
  for (jitbridge_arg& a : ones) a = number(JITBRIDGE_ARG_INT, 0, -1);  // every byte 0xFF
  jitbridge_arg args[2 * kPairs];
  unsigned char want[8 * kPairs] = {};
  for (int i = 0; i < kPairs; ++i) {
    const int v = 7 * i - 50;
    args[2 * i] = number(JITBRIDGE_ARG_INT, 0, i + 1);
    args[2 * i + 1] = number(JITBRIDGE_ARG_INT, 0, v);
    want[8 * i] = static_cast<unsigned char>(i + 1);
    std::memcpy(want + 8 * i + 4, &v, 4);
  }
  for (int round = 0; round < 3; ++round) {
    REQUIRE(c_api().launch(fm, &c, ones, kPairs, 0) == JITBRIDGE_OK);
    REQUIRE(c_api().launch(fg, &c, args, 2 * kPairs, 0) == JITBRIDGE_OK);
    const FakeCudaLaunch l = last_launch();
    CHECK((l.buffer_form == 1 && l.pointer_form == 0));
    REQUIRE(l.param_bytes == sizeof want);
    CHECK(std::memcmp(l.params, want, sizeof want) == 0);
  }
  c_api().kernel_release(kg);
  c_api().kernel_release(km);
}

TEST_CASE("c_api: bad arguments are refused with the Python API's messages, naming the argument") {
  Kernel saxpy("saxpy");
  jitbridge_function* f = nullptr;
  REQUIRE(c_api().kernel_resolve(saxpy.k, 0, &f) == JITBRIDGE_OK);
  void* mem = reinterpret_cast<void*>(std::uintptr_t{0x7f0000100000});
  const std::int64_t shape[1] = {16};
  const jitbridge_launch_config c = config(1, 32);
  const std::uint64_t before = last_launch().count;
  auto run = [&](jitbridge_arg a, jitbridge_arg x, jitbridge_arg y, jitbridge_arg n, std::uint32_t flags = 0) {
    const jitbridge_arg args[4] = {a, x, y, n};
    return c_api().launch(f, &c, args, 4, flags);
  };
  const jitbridge_arg a = number(JITBRIDGE_ARG_FLOAT, 1.0), n = number(JITBRIDGE_ARG_INT, 0, 16);
  const jitbridge_arg x = array(mem, 2, 32, shape, 1), y = array(mem, 2, 32, shape, 1);

  CHECK(run(a, x, array(mem, 2, 64, shape, 1), n) == JITBRIDGE_ERROR_TYPE);
  CHECK_THAT(message(), Catch::Contains("saxpy: argument 2 (float*)") && Catch::Contains("got a float64 array"));
  CHECK(run(a, x, array(mem, 2, 32, shape, 1, 0, true), n) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("argument 2") && Catch::Contains("read-only"));
  CHECK(run(a, x, y, number(JITBRIDGE_ARG_INT, 0, std::int64_t{1} << 40)) == JITBRIDGE_ERROR_OVERFLOW);
  CHECK_THAT(message(), Catch::Contains("argument 3 (int)") && Catch::Contains("does not fit in 'int'"));
  CHECK(run(a, x, y, number(JITBRIDGE_ARG_FLOAT, 1.5)) == JITBRIDGE_ERROR_TYPE);
  CHECK_THAT(message(), Catch::Contains("argument 3 (int): got a C double; 'int' takes an integer"));
  jitbridge_arg host = x;
  host.array.device_type = 1;
  CHECK(run(a, host, y, n) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("argument 1") && Catch::Contains("device memory"));
  CHECK(run(a, array(mem, 2, 32, shape, 1, 1), array(mem, 2, 32, shape, 1, 1), n) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("on cuda:1 but the launch is on cuda:0"));
  const std::int64_t negative[1] = {-1};
  CHECK(run(a, array(mem, 2, 32, negative, 1), y, n) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("saxpy: argument 1"));
  jitbridge_arg no_shape = x;
  no_shape.array.ndim = 2;
  no_shape.array.shape = nullptr;
  CHECK(run(a, no_shape, y, n) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("saxpy: argument 1: shape is NULL"));
  CHECK(run(a, x, number(JITBRIDGE_ARG_INT, 0, 7), n) == JITBRIDGE_ERROR_TYPE);
  CHECK_THAT(message(), Catch::Contains("argument 2") && Catch::Contains("takes an array"));
  const jitbridge_arg three[3] = {a, x, y};
  CHECK(c_api().launch(f, &c, three, 3, 0) == JITBRIDGE_ERROR_TYPE);
  CHECK_THAT(message(), Catch::Contains("takes 4 arguments, 3 given"));
  CHECK(last_launch().count == before);  // nothing above reached the driver

  // check_args off: any dtype into any pointer, read-only ones too; scalars keep their rules.
  CHECK(run(a, x, array(mem, 0, 8, shape, 1, 0, true), n, JITBRIDGE_LAUNCH_NO_ARG_CHECKS) == JITBRIDGE_OK);
  CHECK(last_launch().count == before + 1);
  CHECK(run(a, x, y, number(JITBRIDGE_ARG_FLOAT, 1.5), JITBRIDGE_LAUNCH_NO_ARG_CHECKS) == JITBRIDGE_ERROR_TYPE);

  jitbridge_launch_config big = config(1, 4096);
  const jitbridge_arg args[4] = {a, x, y, n};
  CHECK(c_api().launch(f, &big, args, 4, 0) == JITBRIDGE_ERROR_LAUNCH_CONFIG);
  CHECK_THAT(message(), Catch::Contains("block"));
  // A configuration validated once is not validated again (validate_launch_memo), but only one that passed is
  // remembered: between good launches, a bad one is still refused, every time.
  for (int round = 0; round < 2; ++round) {
    CHECK(c_api().launch(f, &c, args, 4, 0) == JITBRIDGE_OK);
    CHECK(c_api().launch(f, &big, args, 4, 0) == JITBRIDGE_ERROR_LAUNCH_CONFIG);
    jitbridge_launch_config zero = c;
    zero.grid[1] = 0;
    CHECK(c_api().launch(f, &zero, args, 4, 0) == JITBRIDGE_ERROR_LAUNCH_CONFIG);
    CHECK_THAT(message(), Catch::Contains("grid: y is 0"));
  }
  big.struct_size = 8;
  CHECK(c_api().launch(f, &big, args, 4, 0) == JITBRIDGE_ERROR_VERSION);
}

TEST_CASE("c_api: the one-pass fast path packs and refuses as the full path, strided and 2-d arrays too") {
  Kernel saxpy("saxpy");
  jitbridge_function* f = nullptr;
  REQUIRE(c_api().kernel_resolve(saxpy.k, 0, &f) == JITBRIDGE_OK);
  void* mem = reinterpret_cast<void*>(std::uintptr_t{0x7f0000100000});
  void* other = reinterpret_cast<void*>(std::uintptr_t{0x7f0000200000});
  const std::int64_t shape[1] = {16}, shape2[2] = {4, 4}, strides[1] = {2}, negative[1] = {-1};
  const jitbridge_launch_config c = config(1, 32);
  auto run = [&](jitbridge_arg a, jitbridge_arg x, jitbridge_arg y, jitbridge_arg n) {
    const jitbridge_arg args[4] = {a, x, y, n};
    return c_api().launch(f, &c, args, 4, 0);
  };
  const jitbridge_arg a = number(JITBRIDGE_ARG_FLOAT, 1.0), n = number(JITBRIDGE_ARG_INT, 0, 16);
  jitbridge_arg strided = array(other, 2, 32, shape, 1);
  strided.array.strides = strides;
  // Accepted alike: plain arrays (shape only), a strided one (filled in full), a 2-d one; then the full path (a C
  // int64 for `a`) with the slots the fast path left.
  for (const jitbridge_arg& y : {array(other, 2, 32, shape, 1), strided, array(other, 2, 32, shape2, 2)}) {
    REQUIRE(run(a, array(mem, 2, 32, shape, 1), y, n) == JITBRIDGE_OK);
    const jitbridge_test::SaxpyParams fast = jitbridge_test::saxpy_params(last_launch());
    REQUIRE(run(number(JITBRIDGE_ARG_INT, 0, 1), array(mem, 2, 32, shape, 1), y, n) == JITBRIDGE_OK);
    const jitbridge_test::SaxpyParams full = jitbridge_test::saxpy_params(last_launch());
    CHECK((fast.a == 1.0f && full.a == 1.0f));
    CHECK((fast.x == reinterpret_cast<std::uint64_t>(mem) && full.x == fast.x));
    CHECK((fast.y == reinterpret_cast<std::uint64_t>(other) && full.y == fast.y));
    CHECK((fast.n == 16 && full.n == 16));
  }
  // The first refused argument decides, whichever path finds it: a bad array after a declined `a` (full path)
  // and after an accepted one (refused inside the fast pass) gives the same message.
  const std::uint64_t before = last_launch().count;
  std::string messages[2];
  int i = 0;
  for (const jitbridge_arg& first : {number(JITBRIDGE_ARG_INT, 0, 1), a}) {
    CHECK(run(first, array(mem, 2, 32, shape, 1), array(other, 2, 32, negative, 1), n) == JITBRIDGE_ERROR_VALUE);
    messages[i++] = message();
  }
  CHECK_THAT(messages[0], Catch::Contains("saxpy: argument 2") && Catch::Contains("shape[0] is negative (-1)"));
  CHECK(messages[1] == messages[0]);
  // An array refused after an argument the fast path declines (a float64 array for float*): the array's error.
  CHECK(run(a, array(mem, 2, 64, shape, 1), array(nullptr, 2, 32, shape, 1), n) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("saxpy: argument 2") && Catch::Contains("data is NULL"));
  CHECK(last_launch().count == before);
}

TEST_CASE("c_api: tensor views and vector pointers are checked by shape, from C too") {
  Kernel views("views"), scale("scale");
  jitbridge_function* f = nullptr;
  REQUIRE(c_api().kernel_resolve(views.k, 0, &f) == JITBRIDGE_OK);
  void* mem = reinterpret_cast<void*>(std::uintptr_t{0x7f0000200000});
  const std::int64_t shape2[2] = {4, 8}, shape1[1] = {32}, odd[1] = {30};
  const jitbridge_launch_config c = config(1, 32);
  jitbridge_arg args[3] = {array(mem, 2, 16, shape2, 2, 0, true), array(mem, 2, 32, shape1, 1),
                           number(JITBRIDGE_ARG_INT, 0, 7)};
  REQUIRE(c_api().launch(f, &c, args, 3, 0) == JITBRIDGE_OK);
  const FakeCudaLaunch l = last_launch();
  std::int64_t dims[4] = {};
  std::memcpy(dims, l.params + 8, sizeof dims);  // shape then strides
  CHECK((dims[0] == 4 && dims[1] == 8 && dims[2] == 8 && dims[3] == 1));
  args[0] = array(mem, 2, 16, shape1, 1, 0, true);
  CHECK(c_api().launch(f, &c, args, 3, 0) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("argument 0") && Catch::Contains("the view has rank 2"));
  args[0] = array(mem, 2, 16, shape2, 2, 0, true);
  args[1] = array(mem, 2, 32, odd, 1);
  CHECK(c_api().launch(f, &c, args, 3, 0) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("argument 1") && Catch::Contains("not a multiple of 4"));

  // The C program of c_header.c: a whole launch through the table from C.
  CHECK(c_launch_one(scale.k, mem, 32) == JITBRIDGE_OK);
  CHECK(last_launch().block[0] == 128);
}

TEST_CASE("c_api: handles are refcounted; NULLs are errors, not crashes") {
  Kernel saxpy("saxpy");
  c_api().kernel_retain(saxpy.k);
  c_api().kernel_release(saxpy.k);  // the Kernel still holds one
  jitbridge_function* f = nullptr;
  CHECK(c_api().kernel_resolve(saxpy.k, 0, &f) == JITBRIDGE_OK);
  CHECK(c_api().kernel_resolve(saxpy.k, 64, &f) == JITBRIDGE_ERROR_VALUE);
  CHECK(f == nullptr);
  CHECK(c_api().kernel_resolve(saxpy.k, 7, &f) == JITBRIDGE_ERROR_VALUE);  // the fake driver has 1 device
  CHECK(c_api().kernel_resolve(nullptr, 0, &f) == JITBRIDGE_ERROR_VALUE);
  CHECK(c_api().launch(nullptr, nullptr, nullptr, 0, 0) == JITBRIDGE_ERROR_VALUE);
  c_api().kernel_release(nullptr);
  int cuda = -1;
  const char* m = nullptr;
  CHECK(c_api().last_error(&m, &cuda) == JITBRIDGE_ERROR_VALUE);
  CHECK(cuda == 0);
}
