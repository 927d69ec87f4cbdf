// view_check.hpp — compares what the view readers did with what the reference says (shared by the
// array_view and dlpack_managed targets).
#pragma once

#include <fmt/format.h>

#include <functional>

#include "fuzz_support.hpp"
#include "jitbridge/array.hpp"
#include "reference.hpp"

namespace jbfuzz {

inline std::string describe(const ref::ViewSpec& s) {
  std::string shape = s.shape_null ? "NULL" : fmt::format("{}", fmt::join(s.shape, ", "));
  std::string strides = s.strides_null ? "NULL" : fmt::format("{}", fmt::join(s.strides, ", "));
  return fmt::format("data={:#x} byte_offset={:#x} ndim={} shape=({}) strides=({}) dtype=(code {}, bits {}, lanes {})",
                     s.data, s.byte_offset, s.ndim, shape, strides, s.dtype.code, s.dtype.bits, s.dtype.lanes);
}

// Runs `make` (which builds a view or throws InteropError) and checks the outcome against `j`.
// Returns the view when it was accepted. Any other exception is a finding.
inline std::optional<jitbridge::ArrayView> check_view(const char* path, const ref::ViewSpec& spec,
                                                      const ref::ViewJudgement& j, bool readonly,
                                                      const std::function<jitbridge::ArrayView()>& make) {
  std::optional<jitbridge::ArrayView> v;
  std::string refused;
  try {
    v = make();
  } catch (const jitbridge::InteropError& e) {
    refused = e.what();
  } catch (const std::exception& e) {
    finding("bad-exception", fmt::format("{}: {} ({})", path, e.what(), describe(spec)));
  }
  if (!v) {
    if (j.verdict == ref::Verdict::accept)
      finding("wrong-refusal", fmt::format("{}: refused ({}) {}", path, refused, describe(spec)));
    return v;
  }
  if (j.verdict == ref::Verdict::refuse)
    finding("wrong-acceptance", fmt::format("{}: accepted although {}: {}", path, j.reason, describe(spec)));
  // Accepted: every field as the reference has it, and every accessor free of undefined behaviour.
  const jitbridge::ArrayView& a = *v;
  auto wrong = [&](const std::string& what) {
    finding("wrong-result", fmt::format("{}: {} ({})", path, what, describe(spec)));
  };
  if (reinterpret_cast<std::uintptr_t>(a.ptr()) != j.address)
    wrong(fmt::format("ptr() is {:#x}, expected {:#x}", reinterpret_cast<std::uintptr_t>(a.ptr()), j.address));
  if (a.ndim() != spec.ndim || a.shape.size() != static_cast<std::size_t>(spec.ndim) || a.strides.size() != a.shape.size())
    wrong(fmt::format("ndim {} (shape {}, strides {} entries)", a.ndim(), a.shape.size(), a.strides.size()));
  for (std::size_t i = 0; i < a.shape.size(); ++i)
    if (a.shape[i] != spec.shape[i]) wrong(fmt::format("shape[{}] is {}", i, a.shape[i]));
  for (std::size_t i = 0; i < a.strides.size(); ++i)
    if (a.strides[i] != j.strides[i]) wrong(fmt::format("strides[{}] is {}, expected {}", i, a.strides[i], j.strides[i]));
  if (!jitbridge::operator==(a.dtype, spec.dtype)) wrong("the dtype differs");
  if (a.readonly != readonly) wrong("the read-only flag differs");
  if (a.size() != j.count) wrong(fmt::format("size() is {}, expected {}", a.size(), j.count));
  const std::int64_t whole_item = spec.dtype.bits % 8 == 0 ? spec.dtype.bits / 8 * spec.dtype.lanes : 0;
  try {
    if (a.nbytes() != j.count * whole_item) wrong(fmt::format("nbytes() is {}", a.nbytes()));
    (void)jitbridge::contiguous_strides(a.shape);
    jitbridge::validate_view(a, "again");  // an accepted view stays valid
  } catch (const std::exception& e) {
    wrong(fmt::format("measuring the accepted view threw: {}", e.what()));
  }
  (void)a.is_c_contiguous();
  return v;
}

}  // namespace jbfuzz
