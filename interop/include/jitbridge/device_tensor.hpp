// jitbridge/device_tensor.hpp — jitbridge's own output arrays: C-contiguous device memory in a stream-ordered
// DeviceBuffer, described by an ArrayView whose owner is that buffer.
#pragma once

#include <memory>

#include "jitbridge/array.hpp"
#include "jitbridge/device_allocator.hpp"
#include "jitbridge/device_buffer.hpp"

namespace jitbridge {

class DeviceTensor {
 public:
  // An uninitialised C-contiguous array of `shape` and `dtype` on `device`, allocated in stream order
  // on `stream`, which the buffer keeps (with its keepalive) until it is freed. The shape is checked as validate_shape does (no overflow anywhere after it). Throws
  // InteropError(value) for a negative extent, more than kMaxNdim dimensions or a dtype without a
  // whole-byte item size, InteropError(overflow) when the array is too big for int64 bytes, and what
  // DeviceBuffer::allocate throws. An empty array allocates nothing and needs no driver. The memory comes from
  // `allocator`, else the allocator that applies on this thread (allocate_buffer), which may throw anything.
  static DeviceTensor empty(const Dims& shape, DLDataType dtype, int device, StreamRef stream,
                            const DeviceAllocator* allocator = nullptr);

  // The view of the whole tensor; view().owner shares the buffer.
  const ArrayView& view() const noexcept { return view_; }
  const std::shared_ptr<DeviceBuffer>& buffer() const noexcept { return buffer_; }
  // The stream the contents are ordered on (DeviceBuffer::stream()).
  CUstream stream() const { return buffer_->stream(); }
  int device() const noexcept { return view_.device.device_id; }
  std::size_t nbytes() const noexcept { return buffer_->bytes(); }

  // Queues zero bytes over the whole tensor on stream() (cuMemsetD8Async). Throws DriverError.
  void fill_zero();
  // A new tensor with the same contents, allocated (by the allocator that applies now) and copied in order
  // on stream() (cuMemcpyDtoDAsync). Throws what empty() and the copy throw.
  DeviceTensor copy() const;

 private:
  ArrayView view_;
  std::shared_ptr<DeviceBuffer> buffer_;
};

}  // namespace jitbridge
