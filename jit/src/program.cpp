// program.cpp — lookups on a compiled Program.
#include <fmt/format.h>

#include "jitbridge/jit.hpp"

namespace jitbridge {

const Kernel* Program::find_kernel(std::string_view name) const {
  for (const Kernel& k : kernels)
    if (k.name == name) return &k;
  for (const Kernel& k : kernels)
    if (k.lowered_name == name) return &k;
  return nullptr;
}

const std::string& Program::lowered_name(std::string_view name_expression) const {
  for (const auto& [expr, lowered] : lowered_names)
    if (expr == name_expression) return lowered;
  throw std::out_of_range(fmt::format("'{}' was not given as a name expression", name_expression));
}

}  // namespace jitbridge
