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

std::string kernel_difference(const Program& base, const Program& other_program) {
  for (const Kernel& k : base.kernels) {
    const Kernel* other = other_program.find_kernel(k.name);
    if (!other) return fmt::format("kernel '{}' is missing from the {} build", k.name, other_program.arch);
    const std::string a = k.signature ? k.signature->to_string() : "(?)";
    const std::string b = other->signature ? other->signature->to_string() : "(?)";
    bool same = a == b && k.lowered_name == other->lowered_name;
    for (std::size_t i = 0; same && k.signature && i < k.signature->params.size(); ++i)
      same = k.signature->params[i].size == other->signature->params[i].size &&
             k.signature->params[i].align == other->signature->params[i].align;
    if (!same)
      return fmt::format("kernel '{}' is {}{} in the {} build but {}{} in the {} build", k.name, other->lowered_name, b,
                         other_program.arch, k.lowered_name, a, base.arch);
  }
  return {};
}

}  // namespace jitbridge
