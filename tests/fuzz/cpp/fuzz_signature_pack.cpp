// fuzz_signature_pack.cpp — libFuzzer target: kernel signatures and argument packing. Signatures come from fuzzed
// probe names (parse_probe) or are built from fuzzed parameter type text (parse_param) with real sizes (or damaged
// ones, as a corrupt cache entry could give); fuzzed argument values (arrays, None, ints at the limits, floats,
// bools, bytes) are packed with plan_signature + pack_argument into an ArgBuffer, each checked against
// ref::judge_argument, and the packed parameter space against ref::judge_layout and the expected bytes.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "fuzz_support.hpp"
#include "jit_internal.hpp"
#include "jitbridge/arguments.hpp"
#include "reference_pack.hpp"

#include <fmt/format.h>

using namespace jitbridge;
using jbfuzz::ref::PackParam;

namespace {

struct Known {
  const char* spelling;
  std::size_t size, align;
};
// Parameter types as NVRTC prints them, with their real sizes and alignments (0: a struct, fuzzed).
const Known kTypes[] = {
    {"float const*", 8, 8}, {"float*", 8, 8}, {"double*", 8, 8}, {"__half*", 8, 8}, {"__half const*", 8, 8},
    {"__nv_bfloat16*", 8, 8}, {"int*", 8, 8}, {"int const*", 8, 8}, {"unsigned int*", 8, 8}, {"long long*", 8, 8},
    {"char*", 8, 8}, {"char const*", 8, 8}, {"signed char*", 8, 8}, {"unsigned char*", 8, 8}, {"bool*", 8, 8},
    {"void*", 8, 8}, {"void const*", 8, 8}, {"float2*", 8, 8}, {"Params*", 8, 8}, {"float volatile*", 8, 8},
    {"float const volatile*", 8, 8}, {"__nv_fp8_e4m3*", 8, 8}, {"thrust::complex<float>*", 8, 8},
    {"int", 4, 4}, {"unsigned int", 4, 4}, {"long", 8, 8}, {"unsigned long", 8, 8}, {"long long", 8, 8},
    {"unsigned long long", 8, 8}, {"short", 2, 2}, {"unsigned short", 2, 2}, {"char", 1, 1}, {"signed char", 1, 1},
    {"unsigned char", 1, 1}, {"bool", 1, 1}, {"float", 4, 4}, {"double", 8, 8}, {"__half", 2, 2},
    {"__nv_bfloat16", 2, 2}, {"Params", 0, 0}, {"float4", 16, 16},
    {"jitbridge::Tensor<float, 2>", 40, 8}, {"jitbridge::Tensor<float const, 1>", 24, 8},
    {"jitbridge::Tensor<const int, 3>", 56, 8}, {"jitbridge::Tensor<void, 1>", 24, 8},
    {"jitbridge::Tensor<float, 0>", 8, 8}, {"jitbridge::Tensor<float, 65>", 1048, 8},
    {"float2", 8, 8}, {"double2", 16, 16}, {"cuda::std::__4::complex<float>", 8, 8},
    {"thrust::complex<double>", 16, 16}, {"float4*", 8, 8}, {"__half2 const*", 8, 8},
    {"double4_32a*", 8, 8}, {"float3*", 8, 8}, {"char4*", 8, 8},
};
// sizeof/alignof of the pointee the probe reports for some of them (others: 0, unknown).
struct Pointee {
  const char* spelling;
  std::size_t size, align;
};
const Pointee kPointees[] = {{"float4*", 16, 16}, {"__half2 const*", 4, 4}, {"double4_32a*", 32, 32}, {"float3*", 12, 4}};

const DLDataType kDtypes[] = {{kDLFloat, 32, 1}, {kDLFloat, 64, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1},
                              {kDLInt, 32, 1},   {kDLUInt, 32, 1},  {kDLInt, 64, 1},   {kDLInt, 8, 1},
                              {kDLUInt, 8, 1},   {kDLBool, 8, 1},   {kDLComplex, 64, 1}, {kDLFloat8_e4m3fn, 8, 1},
                              {kDLOpaqueHandle, 64, 1}, {kDLInt, 8, 4}};

double edgy_double(FuzzedDataProvider& in) {
  static const double kEdges[] = {0.0, -0.0, 1.5, -2.0, 65504.0, 65504.5, 65520.0, 1e5, -1e5,
                                  static_cast<double>(FLT_MAX), static_cast<double>(FLT_MAX) * (1 + 1e-9),
                                  1e300, -1e300, INFINITY, -INFINITY, NAN, 5.96e-8, 2.98e-8, 1e-45, 1e-39,
                                  9007199254740993.0, 3.4e38, 3.5e38};
  if (in.ConsumeBool()) return kEdges[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kEdges) - 1)];
  return in.ConsumeFloatingPoint<double>();
}

struct Args {
  std::vector<ArrayView> views;  // stable storage for array arguments
  std::vector<std::string> bytes;
  std::vector<ArgValue> values;
};

ArgValue fuzzed_value(FuzzedDataProvider& in, Args& store, std::size_t slot) {
  ArgValue v;
  v.python_type = "fuzzed";
  switch (in.ConsumeIntegralInRange<int>(0, 8)) {
    case 0:
    case 1: {
      ArrayView& a = store.views[slot];
      const int nd = in.ConsumeIntegralInRange<int>(0, 4);
      a.shape.resize(static_cast<std::size_t>(nd));
      a.strides.resize(static_cast<std::size_t>(nd));
      for (int i = 0; i < nd; ++i) {
        a.shape[static_cast<std::size_t>(i)] = in.ConsumeIntegralInRange<std::int64_t>(0, 64);
        a.strides[static_cast<std::size_t>(i)] = in.ConsumeIntegralInRange<std::int64_t>(-64, 64);
      }
      a.data = reinterpret_cast<void*>(0x7f0000000000ull + 256 * in.ConsumeIntegral<std::uint16_t>());
      a.byte_offset = 4 * in.ConsumeIntegral<std::uint8_t>();
      a.dtype = kDtypes[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kDtypes) - 1)];
      const int dev = in.ConsumeIntegralInRange<int>(0, 7);
      a.device = {dev == 6 ? kDLCPU : dev == 7 ? kDLCUDAManaged : kDLCUDA, dev % 3 == 0 ? 1 : 0};
      a.readonly = in.ConsumeIntegralInRange<int>(0, 3) == 0;
      v.kind = ArgValue::Kind::array;
      v.array = &a;
      break;
    }
    case 2: v.kind = ArgValue::Kind::null_pointer; break;
    case 3:
      v.kind = ArgValue::Kind::signed_integer;
      v.i = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int64_t>(-300, 300) : jbfuzz::edgy_i64(in);
      break;
    case 4:
      v.kind = ArgValue::Kind::unsigned_integer;  // as the binding makes them: only above INT64_MAX
      v.u = (std::uint64_t{1} << 63) | jbfuzz::edgy_u64(in);
      break;
    case 5:
      v.kind = ArgValue::Kind::floating;
      v.f = edgy_double(in);
      break;
    case 8:
      v.kind = ArgValue::Kind::complex;
      v.f = edgy_double(in);
      v.im = edgy_double(in);
      v.complex_single = in.ConsumeBool();
      if (v.complex_single) {  // numpy.complex64: its parts are floats
        v.f = static_cast<double>(static_cast<float>(std::isfinite(v.f) && std::fabs(v.f) > 3e38 ? 1.0 : v.f));
        v.im = static_cast<double>(static_cast<float>(std::isfinite(v.im) && std::fabs(v.im) > 3e38 ? 1.0 : v.im));
      }
      break;
    case 6:
      v.kind = ArgValue::Kind::boolean;
      v.i = in.ConsumeBool();
      break;
    default: {
      std::string& b = store.bytes[slot];
      b = in.ConsumeBytesAsString(in.ConsumeIntegralInRange<std::size_t>(0, 64));
      v.kind = ArgValue::Kind::bytes;
      v.data = b.data();
      v.size = b.size();
    }
  }
  return v;
}

std::string show(const std::vector<PackParam>& params) {
  std::string out;
  for (const PackParam& p : params) out += fmt::format("[{} size {} align {}] ", p.spelling, p.size, p.align);
  return out;
}

// A probe name as NVRTC demangles it, from fuzzed pieces; parse_probe must return or throw runtime_error.
void probe_case(FuzzedDataProvider& in) {
  std::string text;
  if (in.ConsumeBool()) {
    const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 5);
    std::vector<std::string> types, sizes;
    for (std::size_t i = 0; i < n; ++i) {
      types.push_back(in.ConsumeBool() ? kTypes[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kTypes) - 1)].spelling
                                       : in.ConsumeRandomLengthString(16));
    }
    for (std::size_t i = 0; i < 4 * n + in.ConsumeIntegralInRange<std::size_t>(0, 1); ++i)
      sizes.push_back(in.ConsumeBool() ? fmt::format("{}ull", in.ConsumeIntegral<std::uint64_t>()) : in.ConsumeRandomLengthString(6));
    text = fmt::format("__jitbridge_layout<void (*)({}){}{}>", fmt::join(types, ", "), sizes.empty() ? "" : ", ",
                       fmt::join(sizes, ", "));
  } else {
    text = in.ConsumeRandomLengthString(200);
  }
  try {
    std::optional<Signature> sig = detail::parse_probe(text);
    if (sig) {
      (void)sig->to_string();
      (void)plan_signature(*sig);
    }
  } catch (const std::runtime_error&) {
  } catch (const std::exception& e) {
    jbfuzz::finding("bad-exception", fmt::format("parse_probe('{}') threw {}", text, e.what()));
  }
}

void pack_case(FuzzedDataProvider& in) {
  const bool damaged = in.ConsumeIntegralInRange<int>(0, 7) == 0;  // sizes and alignments as a corrupt entry gives them
  const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 8);
  std::vector<PackParam> params;
  Signature sig;
  for (std::size_t i = 0; i < n; ++i) {
    PackParam p;
    if (in.ConsumeIntegralInRange<int>(0, 5) != 0) {
      const Known& k = kTypes[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kTypes) - 1)];
      p.spelling = k.spelling;
      p.size = k.size;
      p.align = k.align;
      for (const Pointee& q : kPointees)
        if (p.spelling == q.spelling) {
          p.pointee_size = q.size;
          p.pointee_align = q.align;
        }
      if (k.size == 0) {
        p.size = in.ConsumeIntegralInRange<std::size_t>(1, 64);
        p.align = std::size_t{1} << in.ConsumeIntegralInRange<int>(0, 4);
      }
      if (in.ConsumeIntegralInRange<int>(0, 7) == 0) p.spelling = " " + p.spelling + "  ";
    } else {
      p.spelling = in.ConsumeRandomLengthString(40);
      p.size = in.ConsumeIntegralInRange<std::size_t>(0, 64);
      p.align = std::size_t{1} << in.ConsumeIntegralInRange<int>(0, 4);
    }
    if (damaged) {
      p.size = in.ConsumeBool() ? jbfuzz::edgy_u64(in) : p.size;
      p.align = in.ConsumeBool() ? jbfuzz::edgy_u64(in) : p.align;
    }
    Param param = detail::parse_param(p.spelling);
    param.size = p.size;
    param.align = p.align;
    if (param.kind == Param::Kind::pointer) {
      param.pointee_size = p.pointee_size;
      param.pointee_align = p.pointee_align;
    }
    sig.params.push_back(param);
    params.push_back(std::move(p));
  }
  Args store;
  store.views.resize(n);
  store.bytes.resize(n);
  for (std::size_t i = 0; i < n; ++i) store.values.push_back(fuzzed_value(in, store, i));

  const jbfuzz::ref::PackPlanJudgement layout = jbfuzz::ref::judge_layout(params);
  std::vector<ParamPlan> plan;
  try {
    plan = plan_signature(sig);
  } catch (const std::exception& e) {
    jbfuzz::finding("bad-exception", fmt::format("plan_signature threw {}: {}", e.what(), show(params)));
  }
  static ArgBuffer buffer;  // reused across inputs, as launches reuse theirs
  try {
    buffer.reset(sig);
  } catch (const ArgumentError& e) {
    if (layout.layout_ok) jbfuzz::finding("wrong-refusal", fmt::format("ArgBuffer::reset: {}: {}", e.what(), show(params)));
    return;
  } catch (const std::exception& e) {
    jbfuzz::finding("bad-exception", fmt::format("ArgBuffer::reset threw {}: {}", e.what(), show(params)));
  }
  if (!layout.layout_ok) jbfuzz::finding("wrong-acceptance", "ArgBuffer::reset took a layout past 32764 bytes: " + show(params));

  PackResult where;
  int device = -1;
  std::vector<jbfuzz::ref::PackJudgement> expected;
  for (std::size_t i = 0; i < n; ++i) {
    jbfuzz::ref::PackJudgement j = jbfuzz::ref::judge_argument(params[i], store.values[i], device);
    bool packed = false;
    std::string refused;
    try {
      pack_argument("k", sig, plan, i, store.values[i], buffer, where);
      packed = true;
    } catch (const ArgumentError& e) {
      refused = e.what();
    } catch (const std::exception& e) {
      jbfuzz::finding("bad-exception", fmt::format("pack_argument({}) threw {}: {}", i, e.what(), show(params)));
    }
    if (packed && !j.accept)
      jbfuzz::finding("wrong-acceptance", fmt::format("argument {} packed although {}: {}", i, j.reason, show(params)));
    if (!packed && j.accept)
      jbfuzz::finding("wrong-refusal", fmt::format("argument {} refused ({}): {}", i, refused, show(params)));
    if (!packed) return;  // a launch stops at the first bad argument
    expected.push_back(std::move(j));
  }
  // Everything packed: the parameter space is each parameter's bytes at its offset.
  if (buffer.used() != layout.end || buffer.count() != n)
    jbfuzz::finding("wrong-result", fmt::format("used() {} / count() {}, expected {} / {}: {}", buffer.used(), buffer.count(),
                                                layout.end, n, show(params)));
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* at = buffer.bytes() + layout.offsets[i];
    if (buffer.pointers()[i] != at) jbfuzz::finding("wrong-result", fmt::format("pointers()[{}] is off: {}", i, show(params)));
    const jbfuzz::ref::PackJudgement& j = expected[i];
    bool same = j.bytes.empty() || std::memcmp(at, j.bytes.data(), j.bytes.size()) == 0;
    if (!same && j.nan_at_2) {
      std::uint16_t h = 0;
      std::memcpy(&h, at, 2);
      same = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;  // half NaN
      same = same || ((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0);  // bfloat16 NaN
    }
    if (!same && j.nan_at_4) {
      float f = 0;
      std::memcpy(&f, at, 4);
      same = std::isnan(f);
    }
    if (!same)
      jbfuzz::finding("wrong-result", fmt::format("argument {} packed as other bytes than expected: {}", i, show(params)));
  }
  try {
    if (param_offsets(sig) != layout.offsets)
      jbfuzz::finding("wrong-result", "param_offsets differs from the C layout: " + show(params));
  } catch (const std::exception& e) {
    jbfuzz::finding("bad-exception", fmt::format("param_offsets threw {}: {}", e.what(), show(params)));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeIntegralInRange<int>(0, 4) == 0) probe_case(in);
  else pack_case(in);
  return 0;
}
