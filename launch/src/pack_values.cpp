// pack_values.cpp — the packing loop (pack_values.hpp) and the typed launch's and C interface's use of it (pack_all).
#include "jitbridge/pack_values.hpp"

#include <fmt/format.h>

#include "jitbridge/launch.hpp"

namespace jitbridge {

int pack_values(std::string_view kernel, const Signature* signature, const std::vector<ParamPlan>& plan,
                const ParamLayout* layout, const std::vector<std::size_t>* sizes, const ArgValue* values,
                std::size_t stride, std::size_t n, ArgBuffer& out) {
  auto value = [&](std::size_t i) -> const ArgValue& {
    return *reinterpret_cast<const ArgValue*>(reinterpret_cast<const char*>(values) + i * stride);
  };
  PackResult where;
  if (!signature) {
    if (sizes->size() != n)
      throw ArgumentError(ArgumentError::Kind::type,
                          fmt::format("{} takes {} arguments, {} given", kernel, sizes->size(), n));
    out.reset(*sizes);
    for (std::size_t i = 0; i < n; ++i) pack_unchecked(i, (*sizes)[i], value(i), out, where);
    return where.device;
  }
  if (signature->params.size() != n) throw ArgumentError(ArgumentError::Kind::type, arity_message(kernel, *signature, n));
  out.reset(*signature, layout);
  for (std::size_t i = 0; i < n; ++i) pack_argument(kernel, *signature, plan, i, value(i), out, where);
  return where.device;
}

void launch_detail::pack_all(const Function& function, const Slot* slots, std::size_t n, int device, ArgBuffer& out,
                             bool check_args) {
  const Signature* sig = function.info() && function.info()->signature ? &*function.info()->signature : nullptr;
  const int used = pack_values(function.name(), sig, function.plan(check_args), function.param_layout(),
                               sig ? nullptr : &function.param_sizes(), &slots[0].value, sizeof(Slot), n, out);
  if (used >= 0 && used != device)
    throw ArgumentError(ArgumentError::Kind::value,
                        fmt::format("{}: the arrays are on cuda:{} but the launch is on cuda:{}", function.name(),
                                    used, device));
}

}  // namespace jitbridge
