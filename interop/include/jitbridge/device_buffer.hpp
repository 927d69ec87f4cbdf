// jitbridge/device_buffer.hpp — device memory allocated and freed in stream order (cuMemAllocAsync /
// cuMemFreeAsync), which remembers every stream it was handed to so that the free waits for them.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace jitbridge {

class DeviceBuffer {
 public:
  // `bytes` of memory on `device`, allocated in stream order on `stream` (cuMemAllocAsync from the
  // device's current memory pool, with its primary context current): the memory may be used by work
  // queued on `stream` from now on; other streams must first wait for `stream` (hand_to does that).
  // bytes == 0 allocates nothing (ptr() == 0) and calls no driver function.
  // Throws NoDriverError, DriverError (CUDA_ERROR_OUT_OF_MEMORY among others), std::out_of_range.
  static std::shared_ptr<DeviceBuffer> allocate(int device, std::size_t bytes, CUstream stream);

  // Frees in stream order: each stream the buffer was handed to gets an event that the allocation
  // stream waits for, then cuMemFreeAsync runs on the allocation stream, inside a ContextGuard. Work
  // already queued on any of those streams keeps valid memory; nothing waits on the host.
  // Never throws: driver errors are ignored (at interpreter exit the driver may already be gone).
  ~DeviceBuffer();

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const noexcept { return ptr_; }
  std::size_t bytes() const noexcept { return bytes_; }
  int device() const noexcept { return device_; }
  CUstream allocation_stream() const noexcept { return allocation_stream_; }

  // The stream the contents are ordered on: the allocation stream, later the stream it was last
  // handed to. Thread-safe.
  CUstream stream() const;

  // Hands the buffer to `consumer` for work about to be queued there: `consumer` waits for stream()
  // (an event; no host sync), becomes stream(), and the free will wait for what gets queued on it.
  // Nothing happens when same_stream(consumer, stream()) or the buffer is empty. `consumer` must
  // outlive the buffer, as with torch's Tensor.record_stream (torch's and the default streams do).
  // Thread-safe. Throws NoDriverError, DriverError.
  void hand_to(CUstream consumer);

 private:
  DeviceBuffer(int device, std::size_t bytes, CUstream stream) noexcept
      : device_(device), bytes_(bytes), allocation_stream_(stream), stream_(stream) {}

  int device_;
  std::size_t bytes_;
  CUdeviceptr ptr_ = 0;
  CUstream allocation_stream_;
  mutable std::mutex mutex_;
  CUstream stream_;                 // guarded by mutex_
  std::vector<CUstream> users_;     // streams other than the allocation stream it was handed to
};

}  // namespace jitbridge
