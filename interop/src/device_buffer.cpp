// device_buffer.cpp — stream-ordered allocation and a free that waits for every stream the memory was handed to.
#include "jitbridge/device_buffer.hpp"

#include <algorithm>

#include "jitbridge/device.hpp"
#include "jitbridge/streams.hpp"

namespace jitbridge {

std::shared_ptr<DeviceBuffer> DeviceBuffer::allocate(int device, std::size_t bytes, CUstream stream) {
  stream = normalize_stream(stream);
  std::shared_ptr<DeviceBuffer> buffer(new DeviceBuffer(device, bytes, stream));
  if (bytes == 0) return buffer;
  const DriverApi& api = driver();
  ContextGuard guard(Device::get(device));
  CUdeviceptr ptr = 0;
  check(api.cuMemAllocAsync(&ptr, bytes, stream), "cuMemAllocAsync");
  buffer->ptr_ = ptr;
  return buffer;
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  const DriverApi* api = try_driver();
  if (!api) return;
  try {
    ContextGuard guard(Device::get(device_));
    for (CUstream user : users_) {
      try {
        stream_wait(device_, allocation_stream_, user);
      } catch (...) {
        // The user stream is gone or broken: the allocation stream cannot wait for it any more.
      }
    }
    api->cuMemFreeAsync(ptr_, allocation_stream_);
  } catch (...) {
    // No context any more (interpreter exit): the driver reclaims the memory with the context.
  }
}

CUstream DeviceBuffer::stream() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stream_;
}

void DeviceBuffer::hand_to(CUstream consumer) {
  consumer = normalize_stream(consumer);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ptr_ || consumer == stream_) return;
  stream_wait(device_, consumer, stream_);
  stream_ = consumer;
  if (consumer != allocation_stream_ && std::find(users_.begin(), users_.end(), consumer) == users_.end())
    users_.push_back(consumer);
}

}  // namespace jitbridge
