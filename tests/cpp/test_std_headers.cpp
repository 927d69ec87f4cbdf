// test_std_headers.cpp — standard headers in pasted code: the libcu++/NVRTC shims, their opt-out, and a user's own header winning.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <utility>

#include "jit_internal.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/jit.hpp"
#include "temp_dir.hpp"

using namespace jitbridge;
using jitbridge::testing::TempDir;

namespace {

Cache& memory_cache() {
  static Cache cache(CacheConfig{false, "", 1 << 20});
  return cache;
}

CompileOptions for_arch() {
  CompileOptions o;
  o.arch = "sm_90";
  return o;
}

// Each header with a use of what it declares that would not compile without it.
const std::vector<std::pair<std::string, std::string>>& header_uses() {
  static const std::vector<std::pair<std::string, std::string>> uses = {
      {"type_traits", "static_assert(std::is_same<int, std::remove_const_t<const int>>::value, \"\");"},
      {"cstdint", "__device__ std::uint32_t a1 = 1; __device__ std::int64_t b1 = 2;"},
      {"climits", "static_assert(INT_MAX == 2147483647 && CHAR_BIT == 8, \"\");"},
      {"limits", "static_assert(std::numeric_limits<int>::max() == 2147483647, \"\");"
                 "__device__ float inf() { return std::numeric_limits<float>::infinity(); }"},
      {"utility", "__device__ int f() { auto p = std::make_pair(1, 2.0f); int x = 3, y = 4; std::swap(x, y);"
                  " return p.first + std::move(x); }"},
      {"cmath", "__device__ float f(float x) { return std::sqrt(x) + std::fabs(x) + std::exp(x); }"},
      {"cassert", "__device__ void f(int x) { assert(x > 0); }"},
      {"cstddef", "__device__ std::size_t n = sizeof(std::max_align_t); struct S { int a; int b; };"
                  " __device__ std::size_t off() { return offsetof(S, b); }"},
      {"cstdlib", "__device__ int f(int x) { return std::abs(x); }"},
      {"cstring", "__device__ void f(void* a, const void* b) { std::memcpy(a, b, 4); std::memset(a, 0, 4); }"},
      {"tuple", "__device__ int f() { auto t = std::make_tuple(1, 2.0f); return std::get<0>(t)"
                " + int(std::tuple_size<decltype(t)>::value); }"},
      {"array", "__device__ int f() { std::array<int, 3> a = {1, 2, 3}; return a[1] + int(a.size()); }"},
      {"complex", "__device__ float f() { std::complex<float> z(1.0f, 2.0f); return std::abs(z * z) + z.real(); }"},
      {"initializer_list", "__device__ int f() { std::initializer_list<int> l = {1, 2}; return int(l.size()); }"},
      {"cfloat", "static_assert(FLT_MANT_DIG == 24 && DBL_MAX_EXP == 1024, \"\");"
                 "__device__ float f() { return FLT_MAX * FLT_EPSILON + FLT_MIN; }"},
      {"cstdio", "__device__ void f() { printf(\"%d\\n\", 1); }"},
      {"stdio.h", "__device__ void f() { printf(\"%d\\n\", 1); }"},
      {"stdint.h", "__device__ uint32_t a1 = 1; __device__ int64_t b1 = 2; static_assert(INT32_MAX == 2147483647, \"\");"},
      {"limits.h", "static_assert(INT_MAX == 2147483647, \"\");"},
      {"math.h", "__device__ float f(float x) { return sqrtf(x) + fabsf(x) + float(M_PI); }"},
      {"assert.h", "__device__ void f(int x) { assert(x > 0); }"},
      {"stddef.h", "__device__ size_t n = 0; __device__ ptrdiff_t d = 0; struct S { int a; int b; };"
                   " __device__ size_t off() { return offsetof(S, b); }"},
      {"stdlib.h", "__device__ int f(int x) { void* p = malloc(4); free(p); return abs(x); }"},
      {"string.h", "__device__ void f(void* a, const void* b) { memcpy(a, b, 4); memset(a, 0, 4); }"},
      {"float.h", "static_assert(FLT_MANT_DIG == 24, \"\"); __device__ double f() { return DBL_EPSILON; }"},
  };
  return uses;
}

std::string kernel_using(const std::string& header, const std::string& use) {
  return "#include <" + header + ">\n" + use + "\nextern \"C\" __global__ void k(int* out) { out[0] = 1; }\n";
}

}  // namespace

TEST_CASE("each standard header compiles alone in pasted code") {
  if (!detail::std_shims_available()) { WARN("skipped: no libcu++ (cuda/std) on the include path"); return; }
  for (const auto& [header, use] : header_uses()) {
    INFO("<" << header << ">");
    auto p = compile(kernel_using(header, use), for_arch(), &memory_cache());
    CHECK(p->find_kernel("k") != nullptr);
  }
}

TEST_CASE("all standard headers compile together") {
  if (!detail::std_shims_available()) { WARN("skipped: no libcu++ (cuda/std) on the include path"); return; }
  std::string src;
  for (const auto& [header, use] : header_uses()) src += "#include <" + header + ">\n";
  int n = 0;
  for (const auto& [header, use] : header_uses()) src += "namespace n" + std::to_string(n++) + " { " + use + " }\n";
  src += "extern \"C\" __global__ void k(int* out) { out[0] = 1; }\n";
  auto p = compile(src, for_arch(), &memory_cache());
  CHECK(p->find_kernel("k") != nullptr);
}

TEST_CASE("llm.c-style includes, cooperative groups and streaming loads compile unchanged") {
  if (!detail::std_shims_available()) { WARN("skipped: no libcu++ (cuda/std) on the include path"); return; }
  const char* src = R"(#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include <assert.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <float.h>
namespace cg = cooperative_groups;
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xFFFFFFFF, v, o);
  return v;
}
__global__ void rows(float* __restrict__ out, const float* __restrict__ x, int C) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  float s = cg::reduce(warp, __ldcs(x + threadIdx.x), cg::plus<float>{});
  assert(C > 0);
  __stcs(out + threadIdx.x, s + warp_sum(1.0f) + rsqrtf(2.0f) + FLT_EPSILON);
}
__global__ void synced(int* flag) { cg::this_grid().sync(); flag[0] = 1; }
)";
  auto p = compile(src, for_arch(), &memory_cache());
  REQUIRE(p->find_kernel("rows") != nullptr);  // C++ linkage: the demangled name
  REQUIRE(p->find_kernel("synced") != nullptr);
  CHECK(p->find_kernel("rows")->signature->to_string() == "(float*, float const*, int)");
}

TEST_CASE("-DJITBRIDGE_NO_STD_SHIMS turns the shims off") {
  if (!detail::std_shims_available()) { WARN("skipped: no libcu++ (cuda/std) on the include path"); return; }
  CompileOptions o = for_arch();
  o.options = {"-DJITBRIDGE_NO_STD_SHIMS"};
  try {
    compile(kernel_using("type_traits", ""), o, &memory_cache());
    FAIL("compiled without shims");
  } catch (const CompileError& e) {
    CHECK(e.details().message.find("type_traits") != std::string::npos);
  }
  // libcu++'s own spelling still works without the shims.
  CHECK(compile("#include <cuda/std/type_traits>\nextern \"C\" __global__ void k() {}\n", o, &memory_cache()));
}

TEST_CASE("a user's own standard header wins over the shim") {
  if (!detail::std_shims_available()) { WARN("skipped: no libcu++ (cuda/std) on the include path"); return; }
  const std::string src = "#include <type_traits>\nstatic_assert(MINE == 7, \"\");\n"
                          "extern \"C\" __global__ void k() {}\n";
  SECTION("a file in an include directory") {
    const TempDir dir("std");
    std::ofstream(dir.path + "/type_traits") << "#pragma once\n#define MINE 7\n";
    CompileOptions o = for_arch();
    o.include_paths = {dir.path};
    CHECK(compile(src, o, &memory_cache()));
    o.include_paths.clear();
    o.options = {"-I" + dir.path};
    CHECK(compile(src, o, &memory_cache()));
    // Without the user's directory the shim is used, which knows no MINE.
    CHECK_THROWS_AS(compile(src, for_arch(), &memory_cache()), CompileError);
  }
  SECTION("an in-memory header") {
    CompileOptions o = for_arch();
    o.headers = {{"type_traits", "#pragma once\n#define MINE 7\n"}};
    CHECK(compile(src, o, &memory_cache()));
  }
}

TEST_CASE("the shims enter the compile as in-memory headers; the opt-out spellings; the key follows the shim set") {
  if (!detail::std_shims_available()) { WARN("skipped: no libcu++ (cuda/std) on the include path"); return; }
  CompileOptions storage;
  const CompileOptions plain = for_arch();
  const std::vector<const Header*> all = detail::std_shims_for(plain);
  CHECK(all.size() == detail::std_shim_headers().size());
  const CompileOptions& with = detail::with_std_headers(plain, all, storage);
  REQUIRE(&with == &storage);
  CHECK(with.headers.size() == detail::std_shim_headers().size());
  CompileOptions opted_out = for_arch();
  opted_out.options = {"-DJITBRIDGE_NO_STD_SHIMS"};
  CHECK(detail::std_shims_for(opted_out).empty());
  CHECK(&detail::with_std_headers(opted_out, detail::std_shims_for(opted_out), storage) == &opted_out);
  const std::vector<std::vector<std::string>> spellings = {
      {"-D", "JITBRIDGE_NO_STD_SHIMS"}, {"--define-macro=JITBRIDGE_NO_STD_SHIMS"}, {"-DJITBRIDGE_NO_STD_SHIMS=1"}};
  for (const std::vector<std::string>& spelling : spellings) {
    opted_out.options = spelling;
    CHECK(detail::std_shims_for(opted_out).empty());
  }
  opted_out.options = {"-DJITBRIDGE_NO_STD_SHIMS_NOT"};
  CHECK(detail::std_shims_for(opted_out).size() == all.size());
  // An in-memory header of a shim's name replaces that shim alone.
  CompileOptions mine = for_arch();
  mine.headers = {{"type_traits", "#pragma once\n"}};
  CHECK(detail::std_shims_for(mine).size() == all.size() - 1);
  // The key names the shim set: a program cached with the shims is not a hit for the same source
  // compiled with them turned off, and the reverse.
  Cache& cache = memory_cache();
  const std::string src = "#include <type_traits>\n__global__ void k(int* x) { *x = std::is_same<int, int>::value; }\n";
  CompileOptions off = for_arch();
  off.options = {"-DJITBRIDGE_NO_STD_SHIMS"};
  auto with_shims = compile(src, for_arch(), &cache);
  CHECK(with_shims->origin == Origin::compiled);
  CHECK(compile(src, for_arch(), &cache)->origin == Origin::memory_cache);
  CHECK_THROWS_AS(compile(src, off, &cache), CompileError);
  // Every shim names where it maps to.
  for (const Header& h : detail::std_shim_headers()) {
    INFO(h.name);
    const bool maps = h.text.find("#include <cuda/std/") != std::string::npos ||
                      h.text.find("#include <c") != std::string::npos || h.name == "cstdio";
    CHECK(maps);
  }
}
