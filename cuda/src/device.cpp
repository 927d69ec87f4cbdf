// device.cpp — per-device primary contexts and cached limits.
#include "jitbridge/device.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace jitbridge {
namespace {

int attribute(const DriverApi& api, CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  check(api.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
  return v;
}

}  // namespace

int Device::count() {
  const DriverApi* api = try_driver();
  int n = 0;
  if (!api || api->cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
  return n;
}

const Device& Device::get(int ordinal) {
  // Lock-free once created (launches look their device up every time).
  static std::array<std::atomic<const Device*>, 64> fast{};
  if (ordinal >= 0 && static_cast<std::size_t>(ordinal) < fast.size()) {
    if (const Device* d = fast[static_cast<std::size_t>(ordinal)].load(std::memory_order_acquire)) return *d;
  }
  static std::mutex mutex;
  static std::vector<std::unique_ptr<Device>>* devices = new std::vector<std::unique_ptr<Device>>();  // never destroyed
  static int known = -1;
  {
    // Fast path: already created (devices only grows, slots are never replaced).
    std::lock_guard<std::mutex> lock(mutex);
    if (known < 0) {
      known = count();
      devices->resize(static_cast<std::size_t>(known));
    }
    if (known == 0) driver();  // throws NoDriverError with the reason when there is no driver
    if (ordinal < 0 || ordinal >= known)
      throw std::invalid_argument(fmt::format("device {} does not exist (this machine has {} CUDA device{})", ordinal,
                                          known, known == 1 ? "" : "s"));
    auto& slot = (*devices)[static_cast<std::size_t>(ordinal)];
    if (!slot) slot.reset(new Device(ordinal));
    if (static_cast<std::size_t>(ordinal) < fast.size())
      fast[static_cast<std::size_t>(ordinal)].store(slot.get(), std::memory_order_release);
    return *slot;
  }
}

Device::Device(int ordinal) : ordinal_(ordinal), api_(&driver()) {
  const DriverApi& api = *api_;
  check(api.cuDeviceGet(&device_, ordinal), "cuDeviceGet");
  check(api.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
  DeviceLimits& l = limits_;
  l.cc_major = attribute(api, device_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  l.cc_minor = attribute(api, device_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  l.multiprocessors = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  l.max_threads_per_block = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  l.max_block_dim[0] = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  l.max_block_dim[1] = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  l.max_block_dim[2] = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  l.max_grid_dim[0] = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  l.max_grid_dim[1] = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  l.max_grid_dim[2] = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  l.max_shared_per_block = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  l.max_shared_per_block_optin = attribute(api, device_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  l.cooperative_launch = attribute(api, device_, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) != 0;
  l.cluster_launch = attribute(api, device_, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) != 0;
  arch_ = fmt::format("sm_{}{}", l.cc_major, l.cc_minor);
}


void Device::make_current() const {
  const DriverApi& api = driver();
  CUcontext current = nullptr;
  if (api.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == context_) return;
  check(api.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
}

void ContextGuard::push(const Device& device) {
  check(device.api().cuCtxPushCurrent(device.context()), "cuCtxPushCurrent");
  pushed_ = &device.api();
}

void ContextGuard::pop() noexcept {
  CUcontext popped = nullptr;
  pushed_->cuCtxPopCurrent(&popped);
}

}  // namespace jitbridge
