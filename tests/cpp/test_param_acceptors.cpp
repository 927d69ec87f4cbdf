// test_param_acceptors.cpp — pack_accepted (the acceptors over plain values, the C interface's launch): the bytes it
// packs are the full path's (pack_values), and it declines, writing nothing that counts, whatever the full path must
// decide or refuse (no GPU needed: real compiled signatures).
#include <catch2/catch.hpp>
#include <cuda_fp16.h>

#include <cstring>
#include <string>
#include <vector>

#include "jitbridge/arguments.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/pack_values.hpp"
#include "jitbridge/param_acceptors.hpp"

using namespace jitbridge;

namespace {

const char* const kSource = R"(
#include <cuda_fp16.h>
struct Params { double scale; int n; };
extern "C" __global__ void k(const float* a, float* b, int n, unsigned char u, bool flag, float f, double d,
                             __half h, Params p, void* raw, long long big, float4* v) {}
)";

const Signature& signature() {
  static Cache cache(CacheConfig{false, "", 1 << 20});
  static std::shared_ptr<const Program> program = [] {
    CompileOptions o;
    o.arch = "sm_90";
    return compile(kSource, o, &cache);
  }();
  const Kernel* k = program->find_kernel("k");
  REQUIRE(k);
  REQUIRE(k->signature);
  return *k->signature;
}

ArrayView device_array(const char* dtype, bool readonly = false, int device = 0, int device_type = kDLCUDA) {
  ArrayView v;
  v.data = reinterpret_cast<void*>(0x7f0000001000 + 0x1000 * device);
  v.device = {static_cast<DLDeviceType>(device_type), device};
  v.dtype = *dtype_from_name(dtype);
  const std::int64_t shape[1] = {16};
  v.shape.assign(shape, 1);
  v.strides = contiguous_strides(v.shape);
  v.readonly = readonly;
  validate_view(v, "test");
  return v;
}

ArgValue of(ArgValue::Kind kind) {
  ArgValue v;
  v.kind = kind;
  return v;
}
ArgValue array(const ArrayView& a) {
  ArgValue v = of(ArgValue::Kind::array);
  v.array = &a;
  return v;
}
ArgValue integer(std::int64_t i) {
  ArgValue v = of(ArgValue::Kind::signed_integer);
  v.i = i;
  return v;
}
ArgValue real(double f) {
  ArgValue v = of(ArgValue::Kind::floating);
  v.f = f;
  return v;
}
ArgValue bytes(const void* p, std::size_t n) {
  ArgValue v = of(ArgValue::Kind::bytes);
  v.data = p;
  v.size = n;
  return v;
}

struct Params {
  double scale;
  int n;
};

// The plan of kSource's k and a call's values, every one of which the acceptors take.
struct Call {
  const Signature& sig = signature();
  std::vector<ParamPlan> plan = plan_signature(sig);
  std::vector<ParamPlan> unchecked = unchecked_plan(plan);
  ParamLayout layout = *param_layout(sig);
  ArrayView a = device_array("float32", true), b = device_array("float32"), raw = device_array("int8");
  __half h = __float2half(1.5f);
  Params p{2.5, 7};
  std::vector<ArgValue> values;
  Call() {
    ArgValue flag = of(ArgValue::Kind::boolean);
    flag.i = 1;
    values = {array(a), array(b), integer(-7), integer(200), flag, real(1.25), real(-2.5), bytes(&h, sizeof h),
              bytes(&p, sizeof p), array(raw), integer(std::int64_t{1} << 40), of(ArgValue::Kind::null_pointer)};
  }
  // pack_accepted's parameter space, or "" when it declines.
  std::string accepted(bool check_args = true, int device = 0) const {
    const std::vector<FastParam> fast = fast_params(sig, check_args ? plan : unchecked, layout);
    std::vector<unsigned char> space(kFastSpaceBytes, 0xcd);  // garbage: padding must come out zero
    if (!pack_accepted(fast, layout.bytes, values.data(), sizeof(ArgValue), values.size(), device, space.data()))
      return "";
    return std::string(reinterpret_cast<const char*>(space.data()), layout.bytes);
  }
  // The full path's parameter space (pack_values).
  std::string packed(bool check_args = true) const {
    ArgBuffer buffer;
    pack_values("k", &sig, check_args ? plan : unchecked, &layout, nullptr, values.data(), sizeof(ArgValue),
                values.size(), buffer);
    REQUIRE(buffer.param_space());
    return std::string(reinterpret_cast<const char*>(buffer.bytes()), buffer.used());
  }
};

}  // namespace

TEST_CASE("pack_accepted packs the full path's bytes, padding zeroed") {
  Call call;
  REQUIRE(call.layout.bytes <= kFastSpaceBytes);
  const std::string fast = call.accepted();
  REQUIRE(!fast.empty());
  CHECK(fast == call.packed());
  CHECK(call.accepted(false) == call.packed(false));
  int n = 0;
  std::memcpy(&n, fast.data() + call.layout.offsets[2], sizeof n);
  CHECK(n == -7);
  void* b = nullptr;
  std::memcpy(&b, fast.data() + call.layout.offsets[1], sizeof b);
  CHECK(b == call.b.ptr());
}

TEST_CASE("pack_accepted declines what the full path must decide or refuse") {
  Call call;
  const ArrayView read_only = device_array("float32", true), doubles = device_array("float64");
  const ArrayView host = device_array("float32", false, 0, kDLCPU), other = device_array("float32", false, 1);
  const ArrayView float4s = device_array("float32");
  auto declines = [&](std::size_t i, ArgValue v, bool check_args = true) {
    Call c;
    c.values[i] = v;
    return c.accepted(check_args).empty();
  };
  CHECK(declines(1, array(read_only)));     // read-only into float*
  CHECK(declines(0, array(doubles)));       // float64 into const float*
  CHECK(declines(1, array(host)));          // host memory
  CHECK(declines(1, array(other)));         // arrays on two devices
  CHECK(declines(11, array(float4s)));      // a vector pointee: its rules are the full path's
  CHECK(declines(2, integer(std::int64_t{1} << 40)));  // out of int's range
  CHECK(declines(3, integer(-1)));          // out of unsigned char's range
  CHECK(declines(5, real(1e300)));          // beyond float's range
  CHECK(declines(2, real(1.0)));            // a double for an int: the full path says why
  CHECK(declines(7, bytes(&call.p, 4)));    // bytes of the wrong size
  ArgValue big = of(ArgValue::Kind::unsigned_integer);
  big.u = 7;
  CHECK(declines(2, big));                  // the full path converts (or refuses) unsigned values
  ArgValue narrow = real(1.0);
  narrow.float_bits = 32;
  CHECK(declines(6, narrow));               // a float32 value: the full path's rule
  CHECK(declines(1, integer(0)));           // not an array

  // Arrays on another device than the launch's; a count that is not the signature's.
  CHECK(call.accepted(true, 1).empty());
  Call all_on_one;
  const ArrayView a1 = device_array("float32", true, 1), b1 = device_array("float32", false, 1);
  const ArrayView raw1 = device_array("int8", false, 1);
  all_on_one.values[0] = array(a1);
  all_on_one.values[1] = array(b1);
  all_on_one.values[9] = array(raw1);
  CHECK(all_on_one.accepted(true, 0).empty());
  CHECK(all_on_one.accepted(true, 1) == all_on_one.packed());
  Call fewer;
  fewer.values.pop_back();
  CHECK(fewer.accepted().empty());

  // check_args off (unchecked_plan): any dtype, read-only too, as the full path takes them.
  CHECK(!declines(1, array(read_only), false));
  CHECK(!declines(0, array(doubles), false));
  CHECK(declines(1, array(host), false));
}

TEST_CASE("fast_params and param_layout: what is worked out once per kernel") {
  const Signature& sig = signature();
  const std::optional<ParamLayout> layout = param_layout(sig);
  REQUIRE(layout);
  // padded: some byte between the parameters belongs to none (found here from the offsets, not the sizes' sum).
  bool gap = false;
  for (std::size_t i = 0; i + 1 < sig.params.size(); ++i)
    gap = gap || layout->offsets[i] + sig.params[i].size < layout->offsets[i + 1];
  CHECK(gap);
  CHECK(layout->padded == gap);
  const std::vector<FastParam> fast = fast_params(sig, plan_signature(sig), *layout);
  REQUIRE(fast.size() == 12);
  // takes_arrays: pointers to scalar types and void* (not vector pointees: NULL only; not values).
  CHECK((fast[0].takes_arrays && fast[1].takes_arrays && fast[9].takes_arrays));
  for (std::size_t i : {2, 3, 4, 5, 6, 7, 8, 10, 11}) CHECK_FALSE(fast[i].takes_arrays);
  CHECK(fast[11].kind == FastParam::Kind::pointer);
  // takes_array, the array rule's parameter half: read-only arrays only into the const pointee.
  CHECK((takes_array(fast[0], true) && takes_array(fast[0], false)));
  CHECK((!takes_array(fast[1], true) && takes_array(fast[1], false)));
  CHECK((!takes_array(fast[9], true) && takes_array(fast[9], false)));
  CHECK((!takes_array(fast[11], false) && !takes_array(fast[2], false)));
  // A pointer whose signature gives it another size than sizeof(void*) (damaged): no array, no NULL either.
  Signature damaged = sig;
  damaged.params[1].size = 4;
  const std::optional<ParamLayout> damaged_layout = param_layout(damaged);
  REQUIRE(damaged_layout);
  const std::vector<FastParam> bad = fast_params(damaged, plan_signature(damaged), *damaged_layout);
  CHECK(bad[1].kind == FastParam::Kind::pointer);
  CHECK_FALSE(bad[1].takes_arrays);
  CHECK(bad[0].takes_arrays);
  {
    const ArrayView b = device_array("float32");
    alignas(16) unsigned char space[kFastSpaceBytes];
    int device = -1;
    CHECK_FALSE(accept_array(bad[1], b.ptr(), b.device, b.dtype, false, device, space));
    CHECK_FALSE(accept_value(bad[1], of(ArgValue::Kind::null_pointer), device, space));
    CHECK(accept_array(fast[1], b.ptr(), b.device, b.dtype, false, device, space));
  }
  CHECK(fast[4].kind == FastParam::Kind::boolean);
  CHECK((fast[5].kind == FastParam::Kind::floating && fast[6].kind == FastParam::Kind::floating));

  static Cache cache(CacheConfig{false, "", 1 << 20});
  CompileOptions o;
  o.arch = "sm_90";
  const std::shared_ptr<const Program> dense =
      compile("extern \"C\" __global__ void d(const double* a, float* b, int n, short s, char c) {}", o, &cache);
  const Kernel* d = dense->find_kernel("d");
  REQUIRE((d && d->signature));
  const std::optional<ParamLayout> dl = param_layout(*d->signature);
  REQUIRE(dl);
  CHECK(dl->bytes == 8 + 8 + 4 + 2 + 1);  // the end of the last parameter: no padding anywhere
  CHECK_FALSE(dl->padded);
}
