// device_buffer.cpp — stream-ordered allocation and a free that waits for every stream the memory was handed to.
#include "jitbridge/device_buffer.hpp"

#include <algorithm>

#include "jitbridge/device.hpp"
#include "jitbridge/streams.hpp"

namespace jitbridge {

std::shared_ptr<DeviceBuffer> DeviceBuffer::allocate(int device, std::size_t bytes, StreamRef stream) {
  if (bytes == 0) return std::shared_ptr<DeviceBuffer>(new DeviceBuffer(device, 0, StreamRef()));
  const CUstream handle = stream.handle;
  std::shared_ptr<DeviceBuffer> buffer(new DeviceBuffer(device, bytes, std::move(stream)));
  const DriverApi& api = driver();
  ContextGuard guard(Device::get(device));
  CUdeviceptr ptr = 0;
  check(api.cuMemAllocAsync(&ptr, bytes, handle), "cuMemAllocAsync");
  buffer->ptr_ = ptr;
  return buffer;
}

std::shared_ptr<DeviceBuffer> DeviceBuffer::adopt(int device, CUdeviceptr ptr, std::size_t bytes, StreamRef stream,
                                                 Release release) {
  std::shared_ptr<DeviceBuffer> buffer(new DeviceBuffer(device, bytes, std::move(stream)));
  buffer->ptr_ = ptr;  // set last: nothing below can throw, so a failed adopt never releases
  buffer->release_ = std::move(release);
  return buffer;
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  const DriverApi* api = try_driver();
  try {
    if (api) {
      ContextGuard guard(Device::get(device_));
      bool ordered = true;
      for (const StreamRef& user : users_) {
        try {
          stream_wait(device_, allocation_stream_.handle, user.handle);
        } catch (...) {
          ordered = false;  // a broken stream (or context): the device cannot order the free after it
        }
      }
      if (!ordered) api->cuCtxSynchronize();  // its result changes nothing below: the free is tried either way
      if (!release_ && api->cuMemFreeAsync(ptr_, allocation_stream_.handle) != CUDA_SUCCESS &&
          api->cuCtxSynchronize() == CUDA_SUCCESS)
        api->cuMemFreeAsync(ptr_, CU_STREAM_LEGACY);  // all work is done: any stream is in order now
    }
  } catch (...) {
    // No context any more (interpreter exit): the driver reclaims the memory with the context.
  }
  if (release_) {
    try {
      release_(ptr_, bytes_, allocation_stream_);
    } catch (...) {
      // Release must not throw; if it does, the memory stays with its allocator.
    }
  }
  // users_, stream_ and allocation_stream_ (their keepalives) are released after this body.
}

CUstream DeviceBuffer::stream() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stream_.handle;
}

StreamRef DeviceBuffer::stream_ref() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stream_;
}

bool DeviceBuffer::needs_no_hand_off(CUstream s) const {
  if (!ptr_) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  return normalize_stream(s) == stream_.handle;
}

void DeviceBuffer::hand_to(const StreamRef& consumer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ptr_ || consumer.handle == stream_.handle) return;
  stream_wait(device_, consumer.handle, stream_.handle);
  stream_ = consumer;
  if (consumer.handle == allocation_stream_.handle) {
    if (!allocation_stream_.keepalive) allocation_stream_.keepalive = consumer.keepalive;
    return;
  }
  auto it = std::find_if(users_.begin(), users_.end(), [&](const StreamRef& u) { return u.handle == consumer.handle; });
  if (it == users_.end()) users_.push_back(consumer);
  else if (!it->keepalive) it->keepalive = consumer.keepalive;
}

}  // namespace jitbridge
