// fuzz_array_view.cpp — libFuzzer target: the view validation every reader goes through (fill_from_dltensor,
// view_from_dltensor, fill_from_cai, both view_from_cai forms) on fuzzed pointers, offsets, shapes, strides and
// dtypes, each outcome checked against ref::judge_view.
#include "jitbridge/array.hpp"
#include "reference.hpp"
#include "view_check.hpp"

using namespace jitbridge;
using jbfuzz::ref::ViewJudgement;
using jbfuzz::ref::ViewSpec;
using jbfuzz::ref::Verdict;

namespace {

const char* const kTypestrs[] = {"<f4", "<f8", "<f2", "|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8",
                                 "<c8", "<c16", "<V2", ">f4", "=f4", "|f8", ">i1", "<f", "<f16", "<V4", "<q4", "f4"};

DLDataType fuzzed_dtype(FuzzedDataProvider& in) {
  static const DLDataType kCommon[] = {{kDLFloat, 32, 1}, {kDLFloat, 16, 1}, {kDLInt, 8, 1},    {kDLUInt, 64, 1},
                                       {kDLBool, 8, 1},   {kDLBfloat, 16, 1}, {kDLComplex, 128, 1}, {kDLFloat, 32, 4},
                                       {kDLInt, 4, 1},    {kDLUInt, 1, 1},   {kDLFloat, 64, 0}};
  if (in.ConsumeBool()) return kCommon[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kCommon) - 1)];
  return DLDataType{in.ConsumeIntegral<std::uint8_t>(), in.ConsumeIntegral<std::uint8_t>(), in.ConsumeIntegral<std::uint16_t>()};
}

std::uint64_t fuzzed_address(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return 0;
    case 1: return 0x7f0000000000ull + 64 * in.ConsumeIntegral<std::uint16_t>();
    default: return jbfuzz::edgy_u64(in);
  }
}

std::vector<std::int64_t> fuzzed_dims(FuzzedDataProvider& in, std::size_t n, bool strides) {
  std::vector<std::int64_t> out(n);
  for (std::int64_t& v : out) {
    v = jbfuzz::dim_value(in);
    if (strides && in.ConsumeBool()) v = jbfuzz::negate(v);
  }
  return out;
}

void dltensor_case(FuzzedDataProvider& in) {
  ViewSpec s;
  s.dtype = fuzzed_dtype(in);
  s.data = fuzzed_address(in);
  s.byte_offset = in.ConsumeBool() ? 0 : jbfuzz::edgy_u64(in);
  const std::uint8_t nd = in.ConsumeIntegral<std::uint8_t>();
  s.ndim = nd < 240 ? nd % 12 : -static_cast<std::int64_t>(nd % 3) - 1;  // up to 11 (Dims' heap path), or negative
  s.shape_null = s.ndim > 0 && in.ConsumeIntegralInRange<int>(0, 31) == 0;
  const std::size_t n = s.ndim > 0 ? static_cast<std::size_t>(s.ndim) : 0;
  s.shape = fuzzed_dims(in, n, false);
  s.strides_null = in.ConsumeBool();
  if (!s.strides_null) s.strides = fuzzed_dims(in, n, true);
  const bool readonly = in.ConsumeBool();

  DLTensor t{};
  t.data = reinterpret_cast<void*>(s.data);
  t.byte_offset = s.byte_offset;
  t.device = {in.ConsumeBool() ? kDLCUDA : kDLCPU, in.ConsumeIntegralInRange<std::int32_t>(0, 3)};
  t.ndim = static_cast<std::int32_t>(s.ndim);
  t.dtype = s.dtype;
  t.shape = s.shape_null ? nullptr : s.shape.data();
  t.strides = s.strides_null ? nullptr : s.strides.data();
  const ViewJudgement j = jbfuzz::ref::judge_view(s);
  // plain_dltensor (the C interface launch's test for C-contiguous arrays) agrees with what the reader does.
  bool filled = true;
  try {
    ArrayView probe;
    fill_from_dltensor(t, readonly, probe, "x");
  } catch (const InteropError&) {
    filled = false;
  }
  if (plain_dltensor(t) != (filled && !t.strides))
    jbfuzz::finding("plain-dltensor", fmt::format("plain_dltensor {} but fill_from_dltensor {} ({})", plain_dltensor(t),
                                                  filled ? "accepted" : "refused", jbfuzz::describe(s)));
  if (in.ConsumeBool()) {
    jbfuzz::check_view("view_from_dltensor", s, j, readonly, [&] { return view_from_dltensor(t, readonly, nullptr, "x"); });
  } else {
    ArrayView reused;  // fill_from_dltensor reuses the launch path's views: start from a dirty one
    reused.shape.resize(9);
    reused.strides.resize(3);
    jbfuzz::check_view("fill_from_dltensor", s, j, readonly, [&] {
      fill_from_dltensor(t, readonly, reused, "x");
      return reused;
    });
  }
}

void cai_case(FuzzedDataProvider& in) {
  const int form = in.ConsumeIntegralInRange<int>(0, 2);  // 0: vectors, 1: raw arrays, 2: fill_from_cai (parsed dtype)
  std::string typestr = in.ConsumeBool() ? kTypestrs[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kTypestrs) - 1)]
                                         : in.ConsumeRandomLengthString(12);
  const std::optional<DLDataType> dtype = jbfuzz::ref::judge_typestr(typestr);
  const std::uint64_t ptr = fuzzed_address(in);
  const bool readonly = in.ConsumeBool();
  const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 10);
  std::vector<std::int64_t> shape = fuzzed_dims(in, n, false);
  std::optional<std::vector<std::int64_t>> strides_bytes;
  if (in.ConsumeBool()) {
    // Byte strides: a multiple of a plausible item size mostly, anything otherwise; sometimes a count mismatch.
    std::size_t count = form == 0 && in.ConsumeIntegralInRange<int>(0, 15) == 0 ? in.ConsumeIntegralInRange<std::size_t>(0, 10) : n;
    std::vector<std::int64_t> st = fuzzed_dims(in, count, true);
    const std::int64_t scale = in.ConsumeBool() ? static_cast<std::int64_t>(dtype ? jitbridge::itemsize(*dtype) : 4) : 1;
    for (std::int64_t& v : st) {
      std::int64_t scaled = 0;
      if (!__builtin_mul_overflow(v, scale, &scaled)) v = scaled;
    }
    strides_bytes = std::move(st);
  }
  const DLDevice device{kDLCUDA, 0};
  ViewSpec s;
  s.data = ptr;
  s.ndim = static_cast<std::int64_t>(n);
  s.shape = shape;
  s.dtype = dtype.value_or(DLDataType{kDLFloat, 32, 1});
  ViewJudgement j;
  if (form == 2 && !dtype) return;  // fill_from_cai takes an already parsed dtype
  if (!dtype) {
    j.verdict = Verdict::refuse;
    j.reason = "the typestr is not a supported dtype";
  } else if (strides_bytes && strides_bytes->size() != n) {
    j.verdict = Verdict::refuse;
    j.reason = "strides and shape differ in length";
  } else {
    bool divisible = true;
    if (strides_bytes) {
      const std::int64_t item = static_cast<std::int64_t>(jitbridge::itemsize(*dtype));
      s.strides_null = false;
      for (std::int64_t b : *strides_bytes) {
        if (b % item != 0) divisible = false;
        s.strides.push_back(b / item);
      }
    }
    if (divisible) {
      j = jbfuzz::ref::judge_view(s);
    } else {
      j.verdict = Verdict::refuse;
      j.reason = "a byte stride is not a multiple of the item size";
    }
  }
  ArrayView reused;
  switch (form) {
    case 0:
      jbfuzz::check_view("view_from_cai(vectors)", s, j, readonly, [&] {
        return view_from_cai(ptr, readonly, shape, strides_bytes, typestr, device, nullptr, "x");
      });
      break;
    case 1:
      jbfuzz::check_view("view_from_cai(arrays)", s, j, readonly, [&] {
        return view_from_cai(ptr, readonly, shape.data(), n, strides_bytes ? strides_bytes->data() : nullptr, typestr,
                             device, nullptr, "x");
      });
      break;
    default:
      jbfuzz::check_view("fill_from_cai", s, j, readonly, [&] {
        fill_from_cai(ptr, readonly, shape.data(), n, strides_bytes ? strides_bytes->data() : nullptr, *dtype, device,
                      reused, "x");
        return reused;
      });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool()) dltensor_case(in);
  else cai_case(in);
  return 0;
}
