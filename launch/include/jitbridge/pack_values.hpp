// jitbridge/pack_values.hpp — the one packing loop of every launch: a call's values against a kernel's plan.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "jitbridge/arguments.hpp"

namespace jitbridge {

// The one packing loop of every launch (the typed launch(), the C interface, the Python call): values[0..n), each
// `stride` bytes after the one before, against `signature`'s `plan`, laid out as `layout` (param_layout; nullptr: worked
// out now); for a kernel without a signature (nullptr), as the driver's `sizes` (pack_unchecked).
// Returns the arrays' device (-1: none). Throws ArgumentError: a wrong count (type), or what pack_argument throws.
int pack_values(std::string_view kernel_name, const Signature* signature, const std::vector<ParamPlan>& plan,
                const ParamLayout* layout, const std::vector<std::size_t>* sizes, const ArgValue* values,
                std::size_t stride, std::size_t n, ArgBuffer& out);

}  // namespace jitbridge
