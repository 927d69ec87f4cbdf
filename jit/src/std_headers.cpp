// std_headers.cpp — in-memory shims that let pasted code #include <type_traits>, <cstdint>, <stdio.h>, ...:
// each maps a standard header onto libcu++ (cuda/std/...) or onto what NVRTC has built in.
#include <sys/stat.h>

#include <array>

#include "jit_internal.hpp"

namespace jitbridge::detail {
namespace {

// Makes std::X name cuda::std::X. Declares cuda::std first: the macro-only headers declare nothing.
constexpr const char* kUsingLibcuxx =
    "namespace cuda { namespace std {} }\n"
    "namespace std { using namespace ::cuda::std; }\n";

// C++ names whose libcu++ header has the same name under cuda/std/.
constexpr std::array<const char*, 14> kLibcuxx = {
    "type_traits", "cstdint", "climits", "limits",   "utility", "cmath",  "cassert",
    "cstddef",     "cstdlib", "cstring", "tuple",    "array",   "complex", "initializer_list"};

// C names and the C++ shim each includes.
constexpr std::array<std::pair<const char*, const char*>, 9> kCNames = {{{"stdint.h", "cstdint"},
                                                                        {"limits.h", "climits"},
                                                                        {"math.h", "cmath"},
                                                                        {"assert.h", "cassert"},
                                                                        {"stddef.h", "cstddef"},
                                                                        {"stdlib.h", "cstdlib"},
                                                                        {"string.h", "cstring"},
                                                                        {"float.h", "cfloat"},
                                                                        {"stdio.h", "cstdio"}}};

// libcu++'s <cuda/std/cfloat> is empty under NVRTC, which predefines no __FLT_*__ macros: the IEEE 754
// binary32/binary64 values (long double is double on the device).
constexpr const char* kCfloat =
    "#pragma once\n"
    "#define FLT_RADIX 2\n#define FLT_EVAL_METHOD 0\n#define DECIMAL_DIG 17\n"
    "#define FLT_MANT_DIG 24\n#define DBL_MANT_DIG 53\n#define LDBL_MANT_DIG 53\n"
    "#define FLT_DIG 6\n#define DBL_DIG 15\n#define LDBL_DIG 15\n"
    "#define FLT_DECIMAL_DIG 9\n#define DBL_DECIMAL_DIG 17\n"
    "#define FLT_MIN_EXP (-125)\n#define DBL_MIN_EXP (-1021)\n"
    "#define FLT_MIN_10_EXP (-37)\n#define DBL_MIN_10_EXP (-307)\n"
    "#define FLT_MAX_EXP 128\n#define DBL_MAX_EXP 1024\n"
    "#define FLT_MAX_10_EXP 38\n#define DBL_MAX_10_EXP 308\n"
    "#define FLT_MAX 3.40282347e+38F\n#define DBL_MAX 1.7976931348623157e+308\n"
    "#define FLT_EPSILON 1.19209290e-7F\n#define DBL_EPSILON 2.2204460492503131e-16\n"
    "#define FLT_MIN 1.17549435e-38F\n#define DBL_MIN 2.2250738585072014e-308\n"
    "#define FLT_TRUE_MIN 1.40129846e-45F\n#define DBL_TRUE_MIN 4.9406564584124654e-324\n"
    "#include <cuda/std/cfloat>\n";

// printf is an NVRTC built-in; the rest of <cstdio> has no device meaning.
constexpr const char* kCstdio = "#pragma once\n// printf is built into NVRTC; nothing else of <cstdio> runs on the device\n";

// POSIX's M_* constants, which glibc's <math.h> and <cmath> give pasted code by default.
constexpr const char* kMathConstants =
    "#ifndef M_PI\n"
    "#define M_E 2.7182818284590452354\n#define M_LOG2E 1.4426950408889634074\n"
    "#define M_LOG10E 0.43429448190325182765\n#define M_LN2 0.69314718055994530942\n"
    "#define M_LN10 2.30258509299404568402\n#define M_PI 3.14159265358979323846\n"
    "#define M_PI_2 1.57079632679489661923\n#define M_PI_4 0.78539816339744830962\n"
    "#define M_1_PI 0.31830988618379067154\n#define M_2_PI 0.63661977236758134308\n"
    "#define M_2_SQRTPI 1.12837916709551257390\n#define M_SQRT2 1.41421356237309504880\n"
    "#define M_SQRT1_2 0.70710678118654752440\n"
    "#endif\n";

std::vector<Header> make_shims() {
  std::vector<Header> out;
  const std::string banner = "// jitbridge std shim (docs/DESIGN.md, \"Standard headers\"); -D" +
                             std::string(kNoStdShimsMacro) + " turns shims off\n";
  for (const char* name : kLibcuxx) {
    std::string text = banner + "#pragma once\n#include <cuda/std/" + name + ">\n" + kUsingLibcuxx;
    if (std::string_view(name) == "cmath") text += kMathConstants;
    out.push_back({name, std::move(text)});
  }
  out.push_back({"cfloat", banner + kCfloat});
  out.push_back({"cstdio", banner + kCstdio});
  for (const auto& [c_name, cpp_name] : kCNames) {
    std::string text = banner + "#pragma once\n#include <" + cpp_name + ">\n";
    if (std::string_view(c_name) == "math.h") text += kMathConstants;
    out.push_back({c_name, std::move(text)});
  }
  return out;
}

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Headers of the C++ and C standard libraries that no shim covers (those libcu++ has are found on disk).
constexpr std::array<const char*, 62> kHostOnly = {
    "algorithm", "any", "atomic", "bitset", "cctype", "cerrno", "cfenv", "charconv", "chrono", "cinttypes",
    "codecvt", "compare", "concepts", "condition_variable", "csetjmp", "csignal", "cstdarg", "ctime", "cuchar",
    "cwchar", "cwctype", "deque", "exception", "execution", "filesystem", "format", "forward_list", "fstream",
    "functional", "future", "iomanip", "ios", "iosfwd", "iostream", "istream", "iterator", "list", "locale", "map",
    "memory", "mutex", "new", "numeric", "optional", "ostream", "queue", "random", "ranges", "regex", "set",
    "span", "sstream", "stack", "stdexcept", "string", "string_view", "thread", "typeinfo", "unordered_map",
    "unordered_set", "variant", "vector"};

}  // namespace

std::string missing_header_hint(std::string_view name) {
  std::string shimmed;
  bool is_shim = false;
  for (const Header& shim : std_shim_headers()) {
    shimmed += (shimmed.empty() ? "<" : ", <") + shim.name + ">";
    is_shim = is_shim || shim.name == name;
  }
  if (is_shim)
    return " (a standard header jitbridge maps onto libcu++, but not in this compile: -D" +
           std::string(kNoStdShimsMacro) +
           " is given, or no libcu++ headers (cuda/std/) were found: `python -m jitbridge doctor` shows the header "
           "search)";
  bool host_only = false;
  for (const char* std_name : kHostOnly) host_only = host_only || name == std_name;
  std::string in_libcuxx;
  if (name.find('/') == std::string_view::npos && name.find('.') == std::string_view::npos) {
    try {
      for (const std::string& dir : compile_include_dirs())
        if (in_libcuxx.empty() && is_file(dir + "/cuda/std/" + std::string(name))) in_libcuxx = std::string(name);
    } catch (const std::exception&) {  // no CUDA headers found: no libcu++ to point at
    }
  }
  if (host_only || !in_libcuxx.empty()) {
    std::string out = " (<" + std::string(name) +
                      "> is a header of the host C++ standard library: device code has no std:: containers, "
                      "strings, streams or allocation, so NVRTC has no such headers. jitbridge maps these "
                      "standard headers onto libcu++: " + shimmed + ".";
    if (!in_libcuxx.empty())
      out += " libcu++'s own version is there: #include <cuda/std/" + in_libcuxx + "> and use cuda::std::.";
    return out + " docs/DESIGN.md, \"Standard headers\")";
  }
  return " (NVRTC searches only the directories given with include_paths=[...] (command line: -I DIR) and the "
         "in-memory headers=; pass the directory holding \"" +
         std::string(name) + "\" as include_paths=[dir], or its text as headers={\"" + std::string(name) +
         "\": text})";
}

const std::vector<Header>& std_shim_headers() {
  static const std::vector<Header> shims = make_shims();
  return shims;
}

bool std_shims_available() {
  static const bool found = [] {
    for (const std::string& dir : compile_include_dirs())
      if (is_file(dir + "/cuda/std/type_traits")) return true;
    return false;
  }();
  return found;
}

const std::string& std_shims_digest() {
  static const std::string digest = [] {
    Hasher h;
    h.field("jitbridge-std-shims-1");
    for (const Header& shim : std_shim_headers()) h.field(shim.name).field(shim.text);
    return h.hex();
  }();
  return digest;
}

std::vector<const Header*> std_shims_for(const CompileOptions& options) {
  std::vector<const Header*> add;
  const std::vector<std::string>& o = options.options;
  for (std::size_t i = 0; i < o.size(); ++i) {
    // -DNAME, -DNAME=..., -D NAME, --define-macro=NAME
    std::string_view defined = o[i];
    if (defined.rfind("-D", 0) == 0) defined.remove_prefix(2);
    else if (defined.rfind("--define-macro=", 0) == 0) defined.remove_prefix(15);
    else continue;
    if (defined.empty() && i + 1 < o.size()) defined = o[i + 1];
    if (defined.substr(0, defined.find('=')) == kNoStdShimsMacro) return add;
  }
  if (!std_shims_available()) return add;
  const std::vector<std::string> user_dirs = user_include_dirs(options);
  for (const Header& shim : std_shim_headers()) {
    bool provided = false;
    for (const Header& mine : options.headers) provided = provided || mine.name == shim.name;
    for (const std::string& dir : user_dirs) provided = provided || is_file(dir + "/" + shim.name);
    if (!provided) add.push_back(&shim);
  }
  return add;
}

const CompileOptions& with_std_headers(const CompileOptions& options, const std::vector<const Header*>& shims,
                                       CompileOptions& storage) {
  if (shims.empty()) return options;
  storage = options;
  for (const Header* shim : shims) storage.headers.push_back(*shim);
  return storage;
}

}  // namespace jitbridge::detail
