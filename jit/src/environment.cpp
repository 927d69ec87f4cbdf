// environment.cpp — facts about this process's toolchain: NVRTC version and library, CUDA headers, default target.
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "jit_internal.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/driver.hpp"
#include "jitbridge/nvrtc_api.hpp"

namespace jitbridge {

std::pair<int, int> nvrtc_version() {
  const NvrtcApi& api = nvrtc_api();
  return {api.major, api.minor};
}

const std::string& nvrtc_library() {
  nvrtc_api();  // loads it; throws CudaNotFoundError when there is none
  return nvrtc_identity();
}

const std::vector<std::string>& toolkit_include_dirs() { return cuda_header_picks().include_dirs; }

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
