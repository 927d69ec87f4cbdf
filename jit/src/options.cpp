// options.cpp — target validation and the option list NVRTC is given.
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <stdexcept>

#include "jit_internal.hpp"
#include "jitbridge/nvrtc_api.hpp"
#include "jitbridge/targets.hpp"

namespace jitbridge::detail {
namespace {

std::string absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char buf[4096];
  if (!getcwd(buf, sizeof buf)) return path;
  return std::string(buf) + "/" + path;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The number of a target that validate_arch accepts ("sm_90a" -> 90); the spelling rules are targets.cpp's.
int arch_number(const std::string& arch) {
  const Target t = parse_target(arch);
  return t.major * 10 + t.minor;
}

}  // namespace

void validate_arch(const std::string& arch) { arch_number(arch); }

void check_arch_supported(const std::string& arch) {
  const int number = arch_number(arch);
  // Asked of NVRTC once per process, before its first compile.
  static const std::vector<int> supported = [] {
    const NvrtcApi& api = nvrtc_api();  // throws CudaNotFoundError; then tried again next time
    int count = 0;
    if (api.nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return std::vector<int>{};
    std::vector<int> archs(static_cast<std::size_t>(count));
    if (api.nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return std::vector<int>{};
    return archs;
  }();
  if (supported.empty()) return;
  for (int s : supported)
    if (s == number) return;
  throw std::invalid_argument(fmt::format("arch: NVRTC {}.{} cannot build '{}'; it supports sm_{}",
                                          nvrtc_version().first, nvrtc_version().second, arch,
                                          fmt::join(supported, ", sm_")));
}

std::vector<std::string> effective_options(const CompileOptions& options, std::string& arch) {
  std::vector<std::string> out;
  out.reserve(options.options.size() + options.include_paths.size() + 6);
  bool verbose = false;
  for (std::size_t i = 0; i < options.options.size(); ++i) {
    const std::string& o = options.options[i];
    std::string given_arch;
    if (starts_with(o, "-arch=")) given_arch = o.substr(6);
    else if (starts_with(o, "--gpu-architecture=")) given_arch = o.substr(19);
    else if ((o == "-arch" || o == "--gpu-architecture") && i + 1 < options.options.size())
      given_arch = options.options[++i];
    else if (o == "-arch" || o == "--gpu-architecture")
      throw std::invalid_argument(fmt::format("options: '{}' needs a value", o));
    if (!given_arch.empty()) {
      if (!arch.empty() && arch != given_arch)
        throw std::invalid_argument(fmt::format(
            "options: -arch={} disagrees with arch='{}'; give the target once", given_arch, arch));
      arch = given_arch;
      continue;
    }
    if (starts_with(o, "-I") && o.size() > 2) {
      out.push_back("-I" + absolute(o.substr(2)));
    } else if (o == "-I" || o == "--include-path") {
      if (i + 1 >= options.options.size())
        throw std::invalid_argument(fmt::format("options: '{}' needs a directory", o));
      out.push_back("-I" + absolute(options.options[++i]));
    } else if (starts_with(o, "--include-path=")) {
      out.push_back("-I" + absolute(o.substr(15)));
    } else {
      if (o == "-Xptxas=-v" || o == "--ptxas-options=-v") verbose = true;
      out.push_back(o);
    }
  }
  for (const std::string& dir : options.include_paths) out.push_back("-I" + absolute(dir));
  for (const std::string& dir : compile_include_dirs()) out.push_back("-I" + dir);
  if (arch.empty()) arch = default_arch();
  validate_arch(arch);
  out.push_back("-arch=" + arch);
  if (starts_with(arch, "sm_") && !verbose) out.push_back("-Xptxas=-v");
  return out;
}

std::vector<std::string> user_include_dirs(const CompileOptions& options) {
  std::vector<std::string> out;
  const std::vector<std::string>& o = options.options;
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (starts_with(o[i], "-I") && o[i].size() > 2) out.push_back(absolute(o[i].substr(2)));
    else if (starts_with(o[i], "--include-path=")) out.push_back(absolute(o[i].substr(15)));
    else if ((o[i] == "-I" || o[i] == "--include-path") && i + 1 < o.size()) out.push_back(absolute(o[++i]));
  }
  for (const std::string& dir : options.include_paths) out.push_back(absolute(dir));
  return out;
}

}  // namespace jitbridge::detail
