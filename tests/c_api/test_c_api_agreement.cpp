// test_c_api_agreement.cpp — the C interface's launch fast path (pack_fast in launch/src/c_api.cpp: scalars straight
// to their acceptors, take_plain_array (the array rule, accept_array), slots for strided arrays) against its full path
// (pack_all) on the fake driver: for arrays of edge-value fields in every pointer form (typed, const, void*, char*),
// both give the same code and message, or the driver the same bytes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>

#include "c_api_support.hpp"
#include "dlpack/dlpack.h"
#include "jitbridge/c_api.h"

using jitbridge_test::c_api;
using jitbridge_test::last_launch;
using jitbridge_test::message;

namespace {

// A float first, so that a C int64 there sends the whole launch to the full path (pack_values converts it) while a
// C double keeps it on the fast path; then one pointer of each form the fast path reads differently.
const char* const kSource =
    "extern \"C\" __global__ void forms(float a, const float* x, double* y, void* v, const char* c, float* z, "
    "int n) {}";
constexpr int kArrays = 5;  // x, y, v, c, z

// xorshift64: a fixed pseudo-random sequence (the same cases every run).
struct Rng {
  std::uint64_t s = 0x9e3779b97f4a7c15ull;
  std::uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  template <class T, std::size_t N>
  T pick(const T (&items)[N]) {
    return items[next() % N];
  }
};

// One array argument of edge values: valid in most fields most of the time, so that later checks are reached.
struct RandomArray {
  std::int64_t shape[65] = {}, strides[65] = {};  // room for ndim 65 (past kMaxNdim); past 3 all 1
  jitbridge_arg arg{};

  void fill(Rng& rng, const jitbridge_array& usual) {
    static const std::int64_t extents[] = {1, 16, 7, 0, -1, INT64_MAX, std::int64_t{1} << 40, 3};
    static const std::uintptr_t addresses[] = {0x7f0000100000, 0x7f0000100000, 0, UINTPTR_MAX - 15, UINTPTR_MAX, 0x10};
    static const std::int32_t device_types[] = {2, 2, 2, 13, 1, 7};
    static const std::int32_t device_ids[] = {0, 0, 0, 1, -1};
    static const std::uint8_t codes[] = {kDLFloat, kDLFloat, kDLInt, kDLUInt, kDLBfloat, kDLOpaqueHandle, 99};
    static const std::uint8_t bits[] = {32, 32, 64, 8, 16, 0, 1};
    static const std::uint16_t lanes[] = {1, 1, 1, 2, 0};
    static const std::int32_t ndims[] = {1, 1, 0, 2, 3, -1, 65};
    arg = jitbridge_arg{};
    arg.kind = JITBRIDGE_ARG_ARRAY;
    jitbridge_array& r = arg.array;
    r = usual;
    const std::uint64_t which = rng.next();
    // Each field keeps its usual value unless its bit says otherwise.
    if (which & 1) r.data = reinterpret_cast<void*>(rng.pick(addresses));
    if (which & 2) r.device_type = rng.pick(device_types);
    if (which & 4) r.device_id = rng.pick(device_ids);
    if (which & 8) r.dtype_code = rng.pick(codes);
    if (which & 16) r.dtype_bits = rng.pick(bits);
    if (which & 32) r.dtype_lanes = rng.pick(lanes);
    if (which & 64) r.readonly = static_cast<std::int32_t>(rng.next() % 3);
    r.ndim = (which & 128) ? rng.pick(ndims) : 1;
    for (int i = 0; i < 65; ++i) shape[i] = i >= 3 ? 1 : (which & 256) ? rng.pick(extents) : 16;
    r.shape = (which & 512) && r.ndim != 0 ? nullptr : shape;
    if (which & 1024) {  // strided: C-contiguous ones (elements) for a 1-d array of 1 or 16, or edge values
      static const std::int64_t steps[] = {1, 1, 2, 16, 0, -1, INT64_MAX};
      for (int i = 0; i < 65; ++i) strides[i] = i >= 3 ? 1 : rng.pick(steps);
      r.strides = strides;
    }
  }
};

}  // namespace

TEST_CASE("c_api: the fast path and the full path agree on edge-value arrays in every pointer form") {
  jitbridge_source s{};
  s.struct_size = sizeof s;
  s.source = kSource;
  jitbridge_kernel* k = nullptr;
  REQUIRE(c_api().kernel_from_source(&s, "forms", &k) == JITBRIDGE_OK);
  jitbridge_function* f = nullptr;
  REQUIRE(c_api().kernel_resolve(k, 0, &f) == JITBRIDGE_OK);
  jitbridge_launch_config config{};
  config.struct_size = sizeof config;
  config.grid[0] = config.grid[1] = config.grid[2] = 1;
  config.block[0] = 32;
  config.block[1] = config.block[2] = 1;

  // The usual array per parameter: accepted by it as it is (x const float, y double, v any, c int8, z float).
  const std::uint8_t usual_dtype[kArrays][2] = {
      {kDLFloat, 32}, {kDLFloat, 64}, {kDLUInt, 8}, {kDLInt, 8}, {kDLFloat, 32}};
  jitbridge_array usual[kArrays] = {};
  for (int i = 0; i < kArrays; ++i) {
    usual[i].data = reinterpret_cast<void*>(std::uintptr_t{0x7f0000100000} + 0x1000 * i);
    usual[i].device_type = 2;
    usual[i].dtype_code = usual_dtype[i][0];
    usual[i].dtype_bits = usual_dtype[i][1];
    usual[i].dtype_lanes = 1;
    usual[i].ndim = 1;
  }
  Rng rng;
  RandomArray arrays[kArrays];
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 40000; ++trial) {
    jitbridge_arg fast[kArrays + 2] = {}, full[kArrays + 2] = {};
    fast[0].kind = JITBRIDGE_ARG_FLOAT;
    fast[0].f = 1.0;
    full[0].kind = JITBRIDGE_ARG_INT;
    full[0].i = 1;
    // Most trials vary one array, the others as usual (so each array's own rules decide); some vary them all.
    const int varied = static_cast<int>(rng.next() % (kArrays + 1));
    for (int i = 0; i < kArrays; ++i) {
      arrays[i].fill(rng, usual[i]);
      if (varied < kArrays && i != varied) {
        arrays[i].arg.array = usual[i];
        arrays[i].arg.array.shape = arrays[i].shape;
        arrays[i].shape[0] = 16;
      }
      fast[i + 1] = full[i + 1] = arrays[i].arg;
    }
    fast[kArrays + 1].kind = full[kArrays + 1].kind = JITBRIDGE_ARG_INT;
    fast[kArrays + 1].i = full[kArrays + 1].i = 16;
    const std::uint32_t flags = (rng.next() % 4 == 0) ? JITBRIDGE_LAUNCH_NO_ARG_CHECKS : 0;

    const std::uint64_t before = last_launch().count;
    const int rc_fast = c_api().launch(f, &config, fast, kArrays + 2, flags);
    const std::string m_fast = rc_fast == JITBRIDGE_OK ? "" : message();
    const FakeCudaLaunch l_fast = last_launch();
    const int rc_full = c_api().launch(f, &config, full, kArrays + 2, flags);
    const std::string m_full = rc_full == JITBRIDGE_OK ? "" : message();
    const FakeCudaLaunch l_full = last_launch();
    INFO("trial " << trial << ", flags " << flags << ": " << m_fast << " | " << m_full);
    REQUIRE(rc_fast == rc_full);
    REQUIRE(m_fast == m_full);
    if (rc_fast == JITBRIDGE_OK) {
      ++accepted;
      REQUIRE(l_full.count == before + 2);
      REQUIRE(l_fast.param_bytes == l_full.param_bytes);
      REQUIRE(std::memcmp(l_fast.params, l_full.params, l_fast.param_bytes) == 0);
    } else {
      ++refused;
      REQUIRE(l_full.count == before);  // a refused launch reaches no driver
    }
  }
  // Both outcomes are common, so both paths' rules were compared.
  CHECK(accepted > 2000);
  CHECK(refused > 2000);
  c_api().kernel_release(k);
}
