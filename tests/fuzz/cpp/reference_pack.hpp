// reference_pack.hpp — the packing reference: whether a launch argument fits a parameter printed as `spelling`
// with the signature's size and alignment, and the exact bytes it must become (written apart from arguments.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jitbridge/arguments.hpp"

namespace jbfuzz::ref {

struct PackParam {
  std::string spelling;  // as the compiler prints it: "float const*", "jitbridge::Tensor<float, 2>", "Params"
  std::size_t size = 0, align = 0;
  std::size_t pointee_size = 0, pointee_align = 0;  // pointers: the probe's sizeof/alignof the pointee (0: unknown)
};

struct PackJudgement {
  bool accept = false;
  std::string reason;               // refused: why
  std::vector<unsigned char> bytes; // accepted: the parameter's bytes
  bool nan_at_2 = false, nan_at_4 = false;  // the bytes are a half/bf16 (2) or float (4) NaN: any NaN will do
};

// The whole argument list: per parameter its judgement; `layout_ok` false when the parameters end past
// the 32764 bytes CUDA allows (then everything is refused); offsets and end where they lie.
struct PackPlanJudgement {
  bool layout_ok = true;
  std::vector<std::size_t> offsets;
  std::size_t end = 0;
};
PackPlanJudgement judge_layout(const std::vector<PackParam>& params);

// One argument against one parameter. `device` is the device of the first array argument so far (-1: none);
// an accepted array argument sets it.
PackJudgement judge_argument(const PackParam& param, const jitbridge::ArgValue& value, int& device);

// IEEE binary16 / bfloat16 of a float, rounded to nearest even (reference conversions).
std::uint16_t half_bits(float f);
std::uint16_t bfloat16_bits(float f);

}  // namespace jbfuzz::ref
