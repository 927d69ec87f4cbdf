// program.cpp — lookups on a compiled Program.
#include <fmt/format.h>

#include "jitbridge/jit.hpp"

namespace jitbridge {
namespace {

// A name as errors show it: at most 200 characters (a name can be anything a caller passed).
std::string shown(std::string_view name) {
  constexpr std::size_t kMax = 200;
  if (name.size() <= kMax) return std::string(name);
  return fmt::format("{}[... {} characters in all]", name.substr(0, kMax), name.size());
}

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// A name expression's spelling without the blanks that do not separate two words: "scale<float,4>",
// "scale<float, 4>" and "scale< float , 4 >" are one; "unsigned int" keeps its blank; "> >" and ">>" are one.
std::string spelling(std::string_view name) {
  std::string out;
  bool blank = false;
  for (char c : name) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      blank = true;
      continue;
    }
    if (blank && !out.empty() && word_char(out.back()) && word_char(c)) out += ' ';
    blank = false;
    out += c;
  }
  return out;
}

}  // namespace

const Kernel* Program::find_kernel(std::string_view name) const {
  for (const Kernel& k : kernels)
    if (k.name == name) return &k;
  for (const Kernel& k : kernels)
    if (k.lowered_name == name) return &k;
  const std::string wanted = spelling(name);  // a name expression spelled with other blanks
  for (const Kernel& k : kernels)
    if (spelling(k.name) == wanted) return &k;
  return nullptr;
}

const std::string& Program::lowered_name(std::string_view name_expression) const {
  for (const auto& [expr, lowered] : lowered_names)
    if (expr == name_expression) return lowered;
  for (const auto& [expr, lowered] : lowered_names)
    if (spelling(expr) == spelling(name_expression)) return lowered;
  throw std::out_of_range(fmt::format("'{}' was not given as a name expression", shown(name_expression)));
}

std::string Program::missing_kernel_message(std::string_view name) const {
  std::string names;
  for (const Kernel& k : kernels) names += (names.empty() ? "" : ", ") + k.name;
  std::string out =
      fmt::format("no kernel '{}' in the program; it has: {}", shown(name), names.empty() ? "none" : shown(names));
  for (const TemplateKernel& t : templates) {
    if (t.name != name) continue;
    const std::string example = t.example();
    out += fmt::format(
        ". '{}' is a template kernel ({}): instantiate it with a name expression and ask for that name, "
        "e.g. RawKernel(code, '{}', name_expressions=['{}']) or compile(code, name_expressions=['{}'])",
        t.name, t.header, example, example, example);
  }
  return out;
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
