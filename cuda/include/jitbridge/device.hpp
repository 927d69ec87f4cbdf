// jitbridge/device.hpp — a GPU as jitbridge uses it: its primary context (shared with the CUDA
// runtime that PyTorch and CuPy use) and the limits a launch is checked against.
#pragma once

#include "jitbridge/driver.hpp"

namespace jitbridge {

struct DeviceLimits {
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  int max_threads_per_block = 0;
  int max_block_dim[3] = {0, 0, 0};
  int max_grid_dim[3] = {0, 0, 0};
  int max_shared_per_block = 0;        // without opting in (48 KiB)
  int max_shared_per_block_optin = 0;  // what cuFuncSetAttribute may raise a kernel to
  bool cooperative_launch = false;
  bool cluster_launch = false;
};

// One device. Created on first use and kept for the life of the process: the primary context
// is retained once and never released (contexts outliving every handle is the simple correct
// order at exit; the driver tears them down itself).
class Device {
 public:
  // The device with this ordinal. Throws NoDriverError without a driver, std::invalid_argument (ValueError in Python)
  // for an ordinal the driver does not have. Thread-safe; cheap after the first call.
  static const Device& get(int ordinal);
  static int count();  // 0 without a driver

  int ordinal() const { return ordinal_; }
  CUdevice handle() const { return device_; }
  CUcontext context() const { return context_; }
  const DriverApi& api() const { return *api_; }  // driver()'s table (loaded before any Device is made)
  const DeviceLimits& limits() const { return limits_; }
  const std::string& arch() const { return arch_; }  // "sm_90"

  // Makes the primary context current on this thread if it is not already (one cheap query
  // when it is). Never synchronizes.
  void make_current() const;

 private:
  explicit Device(int ordinal);
  int ordinal_;
  const DriverApi* api_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  DeviceLimits limits_;
  std::string arch_;
};

// Makes a device's context current for a scope and restores the previous one (push/pop).
class ContextGuard {
 public:
  // Inline: one cuCtxGetCurrent when the device's context is current already (every launch asks); push() otherwise.
  explicit ContextGuard(const Device& device) {
    CUcontext current = nullptr;
    if (device.api().cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != device.context()) push(device);
  }
  ~ContextGuard() {  // never throws
    if (pushed_ != nullptr) pop();
  }
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  void push(const Device& device);  // throws DriverError
  void pop() noexcept;
  const DriverApi* pushed_ = nullptr;  // the table push() used, which pop() uses too; null: nothing pushed
};

}  // namespace jitbridge
