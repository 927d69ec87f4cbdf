// kernel_scan.cpp — finds the __global__ functions a CUDA source declares, so the signature probe can
// ask NVRTC for their parameter types in the same compile, and template kernels get a name-expression hint.
#include <cctype>
#include <set>

#include "jit_internal.hpp"

namespace jitbridge::detail {
namespace {

// Blanks comments, the insides of string and character literals, and preprocessor lines,
// keeping every newline so line numbers survive.
std::string blank_noise(std::string_view in) {
  std::string out(in);
  std::size_t i = 0;
  bool line_start = true;
  auto blank = [&](std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to && k < out.size(); ++k)
      if (out[k] != '\n') out[k] = ' ';
  };
  while (i < out.size()) {
    char c = out[i];
    if (c == '\n') { line_start = true; ++i; continue; }
    if (line_start && (c == ' ' || c == '\t')) { ++i; continue; }
    if (line_start && c == '#') {  // directive, with backslash continuations
      std::size_t j = i;
      while (j < out.size() && !(out[j] == '\n' && (j == 0 || out[j - 1] != '\\'))) ++j;
      blank(i, j);
      i = j;
      continue;
    }
    line_start = false;
    if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      std::size_t j = out.find('\n', i);
      if (j == std::string::npos) j = out.size();
      blank(i, j);
      i = j;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      std::size_t j = out.find("*/", i + 2);
      j = j == std::string::npos ? out.size() : j + 2;
      blank(i, j);
      i = j;
    } else if (c == '"' || c == '\'') {
      std::size_t j = i + 1;
      while (j < out.size() && out[j] != c && out[j] != '\n') j += out[j] == '\\' ? 2 : 1;
      blank(i + 1, j);
      i = j + 1;
    } else {
      ++i;
    }
  }
  return out;
}

struct Token {
  std::string text;
  int line;
};

std::vector<Token> tokenize(const std::string& s) {
  std::vector<Token> out;
  int line = 1;
  for (std::size_t i = 0; i < s.size();) {
    char c = s[i];
    if (c == '\n') { ++line; ++i; continue; }
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({s.substr(i, j - i), line});
      i = j;
    } else if (c == ':' && i + 1 < s.size() && s[i + 1] == ':') {
      out.push_back({"::", line});
      i += 2;
    } else {
      out.push_back({std::string(1, c), line});
      ++i;
    }
  }
  return out;
}

bool is_identifier(const std::string& t) {
  return !t.empty() && (std::isalpha(static_cast<unsigned char>(t[0])) || t[0] == '_');
}

// Function-like specifiers that may stand between __global__ and the kernel's name.
bool is_attribute_macro(const std::string& t) {
  static const std::set<std::string> names = {
      "__launch_bounds__", "__cluster_dims__", "__maxnreg__", "__attribute__", "__declspec",
      "alignas", "__align__", "__block_size__", "decltype"};
  return names.count(t) != 0;
}

// "template <typename T, int N>" from its tokens starting at `from` (the "template"); "" when the
// angle brackets do not close before the kernel's declaration.
std::string template_header(const std::vector<Token>& toks, std::size_t from, std::size_t end) {
  std::string out;
  int depth = 0;
  for (std::size_t k = from; k < end; ++k) {
    const std::string& t = toks[k].text;
    const bool word = is_identifier(t) || std::isdigit(static_cast<unsigned char>(t[0]));
    const bool prev_word = !out.empty() && (std::isalnum(static_cast<unsigned char>(out.back())) || out.back() == '_');
    if ((word && prev_word) || (!out.empty() && out.back() == ',') || (t == "<" && depth == 0)) out += ' ';
    out += t;
    if (t == "<") ++depth;
    else if (t == ">" && --depth == 0) return out;
  }
  return "";
}

}  // namespace

}  // namespace jitbridge::detail

namespace jitbridge {

std::string TemplateKernel::example() const {
  const std::size_t open = header.find('<');
  const std::size_t close = header.rfind('>');
  std::string args;
  if (open != std::string::npos && close != std::string::npos && close > open) {
    for (const std::string& param :
         detail::split_top_level(std::string_view(header).substr(open + 1, close - open - 1))) {
      if (param.find("...") != std::string::npos || param.rfind("template", 0) == 0) continue;
      const bool is_type = param.rfind("typename", 0) == 0 || param.rfind("class", 0) == 0;
      const bool is_bool = param.rfind("bool", 0) == 0;
      args += std::string(args.empty() ? "" : ", ") + (is_type ? "float" : is_bool ? "true" : "1");
    }
  }
  return name + "<" + args + ">";
}

}  // namespace jitbridge

namespace jitbridge::detail {

std::vector<KernelCandidate> scan_kernels(std::string_view source) {
  const std::vector<Token> toks = tokenize(blank_noise(source));
  struct Scope {
    bool transparent;  // namespace or extern "C" block: kernels inside are reachable
    std::string name;  // namespace name ("" for anonymous and extern blocks)
  };
  std::vector<Scope> scopes;
  std::vector<KernelCandidate> out;
  std::set<std::string> seen;
  std::size_t decl_start = 0;  // first token of the current declaration
  for (std::size_t i = 0; i < toks.size(); ++i) {
    const std::string& t = toks[i].text;
    if (t == ";" || t == "}") {
      if (t == "}" && !scopes.empty()) scopes.pop_back();
      decl_start = i + 1;
      continue;
    }
    if (t == "{") {
      Scope scope{false, ""};
      // namespace a::b {   inline namespace x {   namespace {   extern "" {
      std::size_t k = i;
      std::string name;
      while (k > decl_start && (is_identifier(toks[k - 1].text) || toks[k - 1].text == "::") &&
             toks[k - 1].text != "namespace")
        name = toks[--k].text + name;
      if (k > decl_start && toks[k - 1].text == "namespace") scope = {true, name};
      else if (i >= 3 && toks[i - 1].text == "\"" && toks[i - 2].text == "\"" &&
               toks[i - 3].text == "extern")
        scope = {true, ""};
      scopes.push_back(scope);
      decl_start = i + 1;
      continue;
    }
    if (t != "__global__") continue;
    bool reachable = true;
    for (const Scope& s : scopes) reachable = reachable && s.transparent;
    if (!reachable) continue;
    // The name is the identifier before the first '(' that does not open an attribute.
    std::string name;
    for (std::size_t k = i + 1; k + 1 < toks.size(); ++k) {
      const std::string& tk = toks[k].text;
      if (tk == ";" || tk == "{" || tk == "}") break;
      if (tk == "(" && k > i + 1 && is_attribute_macro(toks[k - 1].text)) {
        int depth = 0;
        for (; k < toks.size(); ++k) {
          if (toks[k].text == "(") ++depth;
          else if (toks[k].text == ")" && --depth == 0) break;
        }
        continue;
      }
      if (tk == "(" && k > i + 1 && is_identifier(toks[k - 1].text)) {
        std::size_t q = k - 1;
        name = toks[q].text;
        while (q >= 2 && toks[q - 1].text == "::" && is_identifier(toks[q - 2].text)) {
          name = toks[q - 2].text + "::" + name;
          q -= 2;
        }
        break;
      }
    }
    if (name.empty()) continue;
    std::string qualified;
    for (const Scope& s : scopes)
      if (!s.name.empty()) qualified += s.name + "::";
    qualified += name;
    bool is_template = decl_start < toks.size() && toks[decl_start].text == "template";
    if (seen.insert(qualified).second)
      out.push_back({qualified, toks[i].line, is_template, is_template ? template_header(toks, decl_start, i) : ""});
  }
  return out;
}

}  // namespace jitbridge::detail
