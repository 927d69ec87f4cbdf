// fuzz_dlpack_managed.cpp — libFuzzer target: the DLPack managed-tensor readers (view_from_managed, versioned and
// legacy) on tensors with fuzzed version, flags, ndim, shape, strides, dtype, data and byte_offset. Checked against
// ref::judge_view, plus the ownership rule: the deleter runs exactly once, when the last copy of the view goes (at
// once for a refused tensor); and an accepted view exported again (export_versioned / export_legacy) reads back the same.
#include "jitbridge/dlpack_export.hpp"
#include "view_check.hpp"

using namespace jitbridge;
using jbfuzz::ref::ViewSpec;

namespace {

// A producer's tensor: the managed struct plus the arrays it points into and a count of deleter calls.
struct Produced {
  std::vector<std::int64_t> shape, strides;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
  int deletes = 0;
};

void count_versioned(DLManagedTensorVersioned* m) { ++static_cast<Produced*>(m->manager_ctx)->deletes; }
void count_legacy(DLManagedTensor* m) { ++static_cast<Produced*>(m->manager_ctx)->deletes; }

void expect_deletes(const Produced& p, int want, const char* when, const ViewSpec& spec) {
  if (p.deletes != want)
    jbfuzz::finding("lifetime", fmt::format("the deleter ran {} times {} (expected {}): {}", p.deletes, when, want,
                                            jbfuzz::describe(spec)));
}

// An accepted view exported and read back must be the same view, and its owner must be released once.
void round_trip(const ArrayView& v, bool versioned, const ViewSpec& spec) {
  ArrayView back;
  try {
    if (versioned) back = view_from_managed(export_versioned(v, v.readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0), "back");
    else back = view_from_managed(export_legacy(v), "back");
  } catch (const std::exception& e) {
    jbfuzz::finding("wrong-refusal", fmt::format("an accepted view exported again was refused: {} ({})", e.what(),
                                                 jbfuzz::describe(spec)));
  }
  bool same = back.ptr() == v.ptr() && back.shape.to_vector() == v.shape.to_vector() &&
              back.strides.to_vector() == v.strides.to_vector() && operator==(back.dtype, v.dtype) &&
              back.device.device_type == v.device.device_type && back.device.device_id == v.device.device_id &&
              (!versioned || back.readonly == v.readonly);
  if (!same) jbfuzz::finding("wrong-result", "an exported view reads back differently: " + jbfuzz::describe(spec));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const bool versioned = in.ConsumeBool();
  if (in.ConsumeIntegralInRange<int>(0, 63) == 0) {  // NULL from the producer
    try {
      if (versioned) view_from_managed(static_cast<DLManagedTensorVersioned*>(nullptr), "x");
      else view_from_managed(static_cast<DLManagedTensor*>(nullptr), "x");
    } catch (const InteropError& e) {
      if (e.kind() != InteropError::Kind::buffer) jbfuzz::finding("bad-exception", "NULL tensor: not a BufferError");
      return 0;
    }
    jbfuzz::finding("wrong-acceptance", "a NULL managed tensor was accepted");
  }
  Produced p;
  ViewSpec s;
  const std::uint32_t major = in.ConsumeBool() ? 1 : in.ConsumeIntegral<std::uint32_t>();
  const std::uint32_t minor = in.ConsumeIntegral<std::uint32_t>();
  const std::uint64_t flags = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint64_t>(0, 7) : jbfuzz::edgy_u64(in);
  const std::uint8_t nd = in.ConsumeIntegral<std::uint8_t>();
  s.ndim = nd < 232 ? nd % 10 : nd < 248 ? 60 + nd % 8 : -static_cast<std::int64_t>(nd % 4) - 1;
  const std::size_t n = s.ndim > 0 ? static_cast<std::size_t>(s.ndim) : 0;
  for (std::size_t i = 0; i < n; ++i) s.shape.push_back(jbfuzz::dim_value(in));
  s.strides_null = in.ConsumeBool();
  for (std::size_t i = 0; !s.strides_null && i < n; ++i)
    s.strides.push_back(in.ConsumeBool() ? jbfuzz::negate(jbfuzz::dim_value(in)) : jbfuzz::dim_value(in));
  s.shape_null = n > 0 && in.ConsumeIntegralInRange<int>(0, 31) == 0;
  s.dtype = in.ConsumeBool() ? DLDataType{kDLFloat, 32, 1}
                             : DLDataType{in.ConsumeIntegral<std::uint8_t>(), in.ConsumeIntegral<std::uint8_t>(),
                                          in.ConsumeBool() ? std::uint16_t{1} : in.ConsumeIntegral<std::uint16_t>()};
  s.data = in.ConsumeBool() ? 0x7f0000000000ull + 256 * in.ConsumeIntegral<std::uint16_t>() : jbfuzz::edgy_u64(in);
  s.byte_offset = in.ConsumeBool() ? 8 * in.ConsumeIntegral<std::uint8_t>() : jbfuzz::edgy_u64(in);
  const bool has_deleter = in.ConsumeIntegralInRange<int>(0, 15) != 0;
  const int copies = in.ConsumeIntegralInRange<int>(0, 3);

  p.shape = s.shape;
  p.strides = s.strides;
  DLTensor& t = versioned ? p.versioned.dl_tensor : p.legacy.dl_tensor;
  t.data = reinterpret_cast<void*>(s.data);
  t.byte_offset = s.byte_offset;
  t.device = {in.ConsumeBool() ? kDLCUDA : static_cast<DLDeviceType>(in.ConsumeIntegralInRange<int>(0, 20)),
              in.ConsumeIntegral<std::int32_t>()};
  t.ndim = static_cast<std::int32_t>(s.ndim);
  t.dtype = s.dtype;
  t.shape = s.shape_null ? nullptr : p.shape.data();
  t.strides = s.strides_null ? nullptr : p.strides.data();
  p.versioned.version = {major, minor};
  p.versioned.flags = flags;
  p.versioned.manager_ctx = &p;
  p.versioned.deleter = has_deleter ? count_versioned : nullptr;
  p.legacy.manager_ctx = &p;
  p.legacy.deleter = has_deleter ? count_legacy : nullptr;

  jbfuzz::ref::ViewJudgement j = jbfuzz::ref::judge_view(s);
  if (versioned && major != DLPACK_MAJOR_VERSION) {
    j.verdict = jbfuzz::ref::Verdict::refuse;
    j.reason = "the DLPack major version is not 1";
  }
  const bool readonly = versioned && (flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  const int one = has_deleter ? 1 : 0;
  {
    std::optional<ArrayView> v = jbfuzz::check_view(versioned ? "view_from_managed(versioned)" : "view_from_managed(legacy)",
                                                    s, j, readonly, [&] {
      return versioned ? view_from_managed(&p.versioned, "x") : view_from_managed(&p.legacy, "x");
    });
    if (!v) {
      expect_deletes(p, one, "after a refusal", s);
      return 0;
    }
    std::vector<ArrayView> kept(static_cast<std::size_t>(copies), *v);
    round_trip(*v, in.ConsumeBool(), s);
    expect_deletes(p, 0, "while the view was alive", s);
    v.reset();
    if (copies > 0) expect_deletes(p, 0, "while copies of the view were alive", s);
  }
  expect_deletes(p, one, "after the last copy went", s);
  return 0;
}
