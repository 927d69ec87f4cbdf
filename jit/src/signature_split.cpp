// signature_split.cpp — kernel signatures whose probe names are too long to demangle: the probe again, by parts.
#include <fmt/format.h>

#include <set>
#include <stdexcept>

#include "jit_internal.hpp"

namespace jitbridge::detail {

namespace {

std::string numbered(std::string_view pattern, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += fmt::format(fmt::runtime(pattern), i) + (i + 1 < n ? ", " : "");
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

// Parameters are taken off a function type kProbeChunk at a time by pattern (a partial
// specialization over 16 leading parameters), 256 at a time by sixteen of those, so that the
// nesting stays shallow (at most 32764 / 256 levels: CUDA's parameter space bounds the count) and
// each of a kernel's chunks costs NVRTC one instantiation per suffix it passes, not one per
// parameter (per-parameter pack indexing cost 16 s for 2000 parameters; this costs 0.2 s).
const std::string& split_probe_source() {
  static const std::string source = [] {
    static_assert(kProbeChunk == 16, "the patterns below take 16 parameters");
    const std::string classes = numbered("class __jitbridge_A{}", kProbeChunk);
    const std::string args = numbered("__jitbridge_A{}", kProbeChunk);
    std::string skip256 = "__jitbridge_F";
    for (std::size_t i = 0; i < 16; ++i) skip256 = "typename __jitbridge_skip16<" + skip256 + ">::type";
    return fmt::format(R"(
template <class __jitbridge_F> struct __jitbridge_skip16 {{ using type = void (*)(); }};
template <{0}, class... __jitbridge_R>
struct __jitbridge_skip16<void (*)({1}, __jitbridge_R...)> {{ using type = void (*)(__jitbridge_R...); }};
template <class __jitbridge_F> struct __jitbridge_head16 {{ using type = __jitbridge_F; }};
template <{0}, class... __jitbridge_R>
struct __jitbridge_head16<void (*)({1}, __jitbridge_R...)> {{ using type = void (*)({1}); }};
template <class __jitbridge_F> struct __jitbridge_skip256 {{ using type = {2}; }};
template <unsigned long long __jitbridge_Q, class __jitbridge_F> struct __jitbridge_rest256
    : __jitbridge_skip256<typename __jitbridge_rest256<__jitbridge_Q - 1, __jitbridge_F>::type> {{}};
template <class __jitbridge_F> struct __jitbridge_rest256<0, __jitbridge_F> {{ using type = __jitbridge_F; }};
template <unsigned long long __jitbridge_R, class __jitbridge_F> struct __jitbridge_rest16
    : __jitbridge_skip16<typename __jitbridge_rest16<__jitbridge_R - 1, __jitbridge_F>::type> {{}};
template <class __jitbridge_F> struct __jitbridge_rest16<0, __jitbridge_F> {{ using type = __jitbridge_F; }};
template <unsigned long long __jitbridge_C, class __jitbridge_F> struct __jitbridge_chunk
    : __jitbridge_head16<typename __jitbridge_rest16<__jitbridge_C % 16,
          typename __jitbridge_rest256<__jitbridge_C / 16, __jitbridge_F>::type>::type> {{}};
template <class __jitbridge_F> struct __jitbridge_drop1 {{ using type = void (*)(); }};
template <class __jitbridge_A0, class... __jitbridge_R>
struct __jitbridge_drop1<void (*)(__jitbridge_A0, __jitbridge_R...)> {{ using type = void (*)(__jitbridge_R...); }};
template <unsigned long long __jitbridge_J, class __jitbridge_F> struct __jitbridge_rest1
    : __jitbridge_drop1<typename __jitbridge_rest1<__jitbridge_J - 1, __jitbridge_F>::type> {{}};
template <class __jitbridge_F> struct __jitbridge_rest1<0, __jitbridge_F> {{ using type = __jitbridge_F; }};
template <class __jitbridge_F> struct __jitbridge_first {{ using type = void; }};
template <class __jitbridge_A0, class... __jitbridge_R>
struct __jitbridge_first<void (*)(__jitbridge_A0, __jitbridge_R...)> {{ using type = void (*)(__jitbridge_A0); }};
template <unsigned long long __jitbridge_I, class __jitbridge_F> struct __jitbridge_param
    : __jitbridge_first<typename __jitbridge_rest1<__jitbridge_I % 16,
          typename __jitbridge_chunk<__jitbridge_I / 16, __jitbridge_F>::type>::type> {{}};
)",
                       classes, args, skip256);
  }();
  return source;
}

std::string chunk_probe(std::string_view function_type, std::size_t chunk) {
  return whole_probe(fmt::format("__jitbridge_chunk<{}, {}>::type", chunk, function_type));
}

std::string param_probe(std::string_view function_type, std::size_t index) {
  return whole_probe(fmt::format("__jitbridge_param<{}, {}>::type", index, function_type));
}

std::optional<std::size_t> probe_parameter_count(std::string_view mangled) {
  // "_Z18__jitbridge_layoutI" <the function type, closed by E> "J" <4 values per parameter> "E" "E":
  // each value an unsigned long long literal "Ly<digits>E" (no substitution stands for a literal).
  constexpr std::string_view prefix = "_Z18__jitbridge_layoutI";
  if (mangled.substr(0, prefix.size()) != prefix || !ends_with(mangled, "EE")) return std::nullopt;
  std::string_view s = mangled.substr(0, mangled.size() - 2);
  std::size_t values = 0;
  while (ends_with(s, "E")) {
    std::size_t digits = s.size() - 1;
    while (digits > 0 && s[digits - 1] >= '0' && s[digits - 1] <= '9') --digits;
    if (digits == s.size() - 1 || digits < 2 || s.substr(digits - 2, 2) != "Ly") break;
    s = s.substr(0, digits - 2);
    ++values;
  }
  if (!ends_with(s, "EJ") || values % 4 != 0) return std::nullopt;
  return values / 4;
}

std::vector<std::optional<Signature>> read_signatures(const std::vector<std::string>& function_types,
                                                      const std::map<std::string, std::string>& lowered_so_far,
                                                      const LowerNames& lower) {
  struct Part {
    std::size_t kernel;
    std::string expression;
    std::size_t first = 0, count = 0;  // the parameters it covers; count 0: the whole kernel
  };
  const std::size_t n = function_types.size();
  std::vector<std::optional<Signature>> out(n);
  std::vector<std::vector<Param>> params(n);  // per kernel being read by parts, each parameter once read
  std::vector<bool> given_up(n, false);
  std::map<std::string, std::string> lowered = lowered_so_far;
  std::vector<Part> todo;
  for (std::size_t k = 0; k < n; ++k) todo.push_back({k, whole_probe(function_types[k])});
  while (!todo.empty()) {
    std::vector<std::string> ask;  // each once: kernels of one function type share their probes
    std::set<std::string> asked;
    for (const Part& p : todo)
      if (!given_up[p.kernel] && !lowered.count(p.expression) && asked.insert(p.expression).second)
        ask.push_back(p.expression);
    if (!ask.empty()) {
      std::optional<std::map<std::string, std::string>> got = lower(ask);
      if (!got) {  // that compile failed: these kernels keep no signature
        for (const Part& p : todo) given_up[p.kernel] = true;
        break;
      }
      lowered.insert(got->begin(), got->end());
    }
    std::vector<Part> next;
    for (const Part& p : todo) {
      const std::string& name = lowered[p.expression];
      if (given_up[p.kernel] || name.empty()) {
        given_up[p.kernel] = true;
        continue;
      }
      if (std::optional<std::string> text = demangled(name)) {
        std::optional<Signature> sig = parse_probe(*text);
        if (p.count == 0) {
          out[p.kernel] = std::move(sig);
          continue;
        }
        if (!sig || sig->params.size() != p.count)
          throw std::runtime_error(fmt::format("signature probe '{}' does not cover parameters {} to {}", *text,
                                               p.first, p.first + p.count - 1));
        for (std::size_t i = 0; i < p.count; ++i) params[p.kernel][p.first + i] = std::move(sig->params[i]);
        continue;
      }
      // Too long for the demangler: the same parameters again in smaller parts, one compile later.
      std::size_t first = p.first, count = p.count;
      if (count == 0) {
        std::optional<std::size_t> total = probe_parameter_count(name);
        if (!total) throw std::runtime_error(fmt::format("unexpected signature probe name '{}'", name));
        params[p.kernel].resize(*total);
        count = *total;
        if (count > kProbeChunk) {  // chunks first: one name per 16 parameters
          for (std::size_t c = 0; c * kProbeChunk < count; ++c)
            next.push_back({p.kernel, chunk_probe(function_types[p.kernel], c), c * kProbeChunk,
                            std::min(kProbeChunk, count - c * kProbeChunk)});
          continue;
        }
      }
      if (count == 1) {  // one parameter's type alone is too long: no signature
        given_up[p.kernel] = true;
        continue;
      }
      for (std::size_t i = first; i < first + count; ++i)
        next.push_back({p.kernel, param_probe(function_types[p.kernel], i), i, 1});
    }
    todo = std::move(next);
  }
  for (std::size_t k = 0; k < n; ++k)
    if (!out[k] && !params[k].empty() && !given_up[k]) out[k] = Signature{std::move(params[k])};
  return out;
}

}  // namespace jitbridge::detail
