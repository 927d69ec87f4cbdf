// environment.cpp — facts about this process's toolchain: NVRTC version, toolkit headers, default target.
#include <dlfcn.h>
#include <fmt/format.h>
#include <nvrtc.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "jit_internal.hpp"
#include "jitbridge/driver.hpp"

namespace jitbridge {
namespace {

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string parent(const std::string& path) {
  std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string canonical(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return path;
  std::string out(real);
  std::free(real);
  return out;
}

std::vector<std::string> find_toolkit_include_dirs() {
  std::vector<std::string> candidates;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v) candidates.push_back(std::string(v) + "/include");
  // Beside the NVRTC library actually loaded: <root>/lib64, <root>/targets/<arch>/lib.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname) {
    std::string lib_dir = parent(canonical(info.dli_fname));
    candidates.push_back(parent(lib_dir) + "/include");
  }
  candidates.push_back(JITBRIDGE_BUILD_CUDA_INCLUDE);
  candidates.push_back("/usr/local/cuda/include");
  for (const std::string& dir : candidates) {
    if (!is_file(dir + "/cuda_fp16.h")) continue;
    std::vector<std::string> out{canonical(dir)};
    if (is_file(dir + "/cccl/cuda/std/type_traits")) out.push_back(canonical(dir + "/cccl"));
    return out;
  }
  return {};
}

}  // namespace

std::pair<int, int> nvrtc_version() {
  static const std::pair<int, int> version = [] {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    return std::make_pair(major, minor);
  }();
  return version;
}

const std::string& nvrtc_library() {
  static const std::string identity = [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) || !info.dli_fname) return std::string("unknown");
    std::string path = canonical(info.dli_fname);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return path;
    return fmt::format("{} ({} bytes, mtime {})", path, static_cast<long long>(st.st_size),
                       static_cast<long long>(st.st_mtim.tv_sec));
  }();
  return identity;
}

const std::vector<std::string>& toolkit_include_dirs() {
  static const std::vector<std::string> dirs = find_toolkit_include_dirs();
  return dirs;
}

std::string default_arch() {
  if (const DriverApi* api = try_driver()) {
    // The device of the current context (what torch/CuPy made current), else device 0.
    CUdevice device = 0;
    CUcontext ctx = nullptr;
    if (!(api->cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx &&
          api->cuCtxGetDevice(&device) == CUDA_SUCCESS)) {
      int count = 0;
      if (api->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) device = -1;
      else if (api->cuDeviceGet(&device, 0) != CUDA_SUCCESS) device = -1;
    }
    if (device >= 0) {
      static std::mutex mutex;
      static std::vector<std::string> by_device;
      std::lock_guard<std::mutex> lock(mutex);
      if (by_device.size() <= static_cast<std::size_t>(device))
        by_device.resize(static_cast<std::size_t>(device) + 1);
      std::string& arch = by_device[static_cast<std::size_t>(device)];
      if (arch.empty()) {
        int major = 0, minor = 0;
        if (api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) ==
                CUDA_SUCCESS &&
            api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) ==
                CUDA_SUCCESS)
          arch = fmt::format("sm_{}{}", major, minor);
      }
      if (!arch.empty()) return arch;
    }
  }
  if (const char* env = std::getenv("JITBRIDGE_ARCH"); env && *env) return env;
  return kDefaultArch;
}

}  // namespace jitbridge
