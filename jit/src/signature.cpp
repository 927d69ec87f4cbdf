// signature.cpp — kernel parameter types: the layout probe appended to sources, and its parser.
#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>

#include "jit_internal.hpp"

namespace jitbridge {

std::string Signature::to_string() const {
  std::string out = "(";
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (i) out += ", ";
    out += params[i].spelling;
  }
  return out + ")";
}

namespace detail {

// For a kernel of type void(A...), naming __jitbridge_layout<void(*)(A...), sizeof(A)...,
// alignof(A)..., pointee sizes..., pointee alignments...> puts every parameter type, its size and
// alignment, and for pointers the size and alignment of the pointee (0 for void, functions and
// incomplete types, and for parameters that are no pointers) into one lowered name.
// A one-byte __device__ variable template costs NVRTC far less than an (empty) probe kernel
// would (0.4 ms instead of 1.5 ms per compile, measured with NVRTC 13.0). Anything else (a
// __device__ variable given as a name expression) hits the primary template and yields
// __jitbridge_layout<void>.
const char* const kProbeSource = R"(
template <class __jitbridge_F, unsigned long long... __jitbridge_L>
__device__ char __jitbridge_layout = 0;
template <class __jitbridge_T, class = void> struct __jitbridge_pointee {
  static constexpr unsigned long long size = 0, align = 0;
};
template <class __jitbridge_T>
struct __jitbridge_pointee<__jitbridge_T*, decltype(void(sizeof(__jitbridge_T)))> {
  static constexpr unsigned long long size = sizeof(__jitbridge_T), align = alignof(__jitbridge_T);
};
template <class __jitbridge_F> struct __jitbridge_sig {
  static constexpr char* layout = &__jitbridge_layout<void>;
};
template <class... __jitbridge_A> struct __jitbridge_sig<void (*)(__jitbridge_A...)> {
  static constexpr char* layout = &__jitbridge_layout<void (*)(__jitbridge_A...),
      sizeof(__jitbridge_A)..., alignof(__jitbridge_A)...,
      __jitbridge_pointee<__jitbridge_A>::size..., __jitbridge_pointee<__jitbridge_A>::align...>;
};
)";

std::string kernel_pointer_type(std::string_view kernel_expression) {
  while (!kernel_expression.empty() &&
         (kernel_expression.front() == '&' || kernel_expression.front() == ' '))
    kernel_expression.remove_prefix(1);
  return fmt::format("decltype(&{})", kernel_expression);
}

std::string whole_probe(std::string_view function_type) {
  return fmt::format("__jitbridge_sig<{}>::layout", function_type);
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::vector<std::string> split_top_level(std::string_view list) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    char c = list[i];
    if (c == '<' || c == '(' || c == '[') ++depth;
    else if (c == '>' || c == ')' || c == ']') --depth;
    else if (c == ',' && depth == 0) {
      out.emplace_back(trim(list.substr(start, i - start)));
      start = i + 1;
    }
  }
  std::string_view last = trim(list.substr(start));
  if (!last.empty() || !out.empty()) out.emplace_back(last);
  return out;
}

Param parse_param(std::string_view spelling) {
  Param p;
  p.spelling = std::string(trim(spelling));
  std::string_view s = p.spelling;
  // A trailing top-level '*' makes a data pointer; a function pointer ends in ')'.
  if (ends_with(s, "*")) {
    p.kind = Param::Kind::pointer;
    std::string_view pointee = trim(s.substr(0, s.size() - 1));
    if (ends_with(pointee, " const")) {
      p.is_const = true;
      pointee = trim(pointee.substr(0, pointee.size() - 6));
    } else if (pointee.substr(0, 6) == "const ") {
      p.is_const = true;
      pointee = trim(pointee.substr(6));
    }
    if (ends_with(pointee, " volatile")) pointee = trim(pointee.substr(0, pointee.size() - 9));
    p.type = std::string(pointee);
  } else {
    p.kind = Param::Kind::value;
    p.type = p.spelling;
  }
  return p;
}

std::optional<Signature> parse_probe(std::string_view demangled) {
  constexpr std::string_view prefix = "__jitbridge_layout<";
  constexpr std::string_view suffix = ">";
  if (demangled.substr(0, prefix.size()) != prefix || !ends_with(demangled, suffix))
    throw std::runtime_error(fmt::format("unexpected signature probe name '{}'", demangled));
  std::vector<std::string> args =
      split_top_level(demangled.substr(prefix.size(), demangled.size() - prefix.size() - suffix.size()));
  if (args.empty() || args[0] == "void") return std::nullopt;
  constexpr std::string_view fn_prefix = "void (*)(";
  const std::string& fn = args[0];
  if (fn.substr(0, fn_prefix.size()) != fn_prefix || fn.back() != ')')
    throw std::runtime_error(fmt::format("unexpected kernel type '{}' in signature probe", fn));
  std::vector<std::string> types =
      split_top_level(std::string_view(fn).substr(fn_prefix.size(), fn.size() - fn_prefix.size() - 1));
  if (types.size() == 1 && (types[0] == "void" || types[0].empty())) types.clear();
  const std::size_t n = types.size();
  if (args.size() != 1 + 4 * n)
    throw std::runtime_error(fmt::format("signature probe '{}' has {} layout values for {} parameters",
                                         demangled, args.size() - 1, n));
  Signature sig;
  for (std::size_t i = 0; i < n; ++i) {
    Param p = parse_param(types[i]);
    // Values print as "8ull" (unsigned long long template arguments).
    p.size = std::strtoull(args[1 + i].c_str(), nullptr, 10);
    p.align = std::strtoull(args[1 + n + i].c_str(), nullptr, 10);
    if (p.kind == Param::Kind::pointer) {
      p.pointee_size = std::strtoull(args[1 + 2 * n + i].c_str(), nullptr, 10);
      p.pointee_align = std::strtoull(args[1 + 3 * n + i].c_str(), nullptr, 10);
    }
    sig.params.push_back(std::move(p));
  }
  return sig;
}

std::optional<std::string> demangled(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !out) return std::nullopt;
  return std::string(out.get());
}

std::string demangle(const std::string& mangled) { return demangled(mangled).value_or(mangled); }

}  // namespace detail
}  // namespace jitbridge
