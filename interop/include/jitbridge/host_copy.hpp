// jitbridge/host_copy.hpp — copies between host memory and jitbridge's device tensors, in stream order.
#pragma once

#include <cstddef>
#include <memory>

#include "jitbridge/array.hpp"
#include "jitbridge/device_tensor.hpp"
#include "jitbridge/driver.hpp"

namespace jitbridge {

// Host memory jitbridge allocated for a copy: pageable, 256-byte aligned (DLPack's advice), at least
// 256 bytes (so even an empty array has a real address). Freed by the destructor, which never throws
// and may run on any thread without the GIL. Throws std::bad_alloc.
class HostBuffer {
 public:
  explicit HostBuffer(std::size_t bytes);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() const noexcept { return data_; }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A C-contiguous host copy of `t`: the copy is queued on `stream` after `stream` waits for t's
// stream (cuMemcpyDtoHAsync), and the host waits for it (cuStreamSynchronize) before this returns,
// since a host consumer cannot order itself on a stream. The view (device kDLCPU) owns its HostBuffer.
// t's own stream and hand-off record are left as they are (the copy is finished when this returns).
// Throws NoDriverError, DriverError, std::bad_alloc.
ArrayView copy_to_host(const DeviceTensor& t, CUstream stream);

// Throws InteropError(value) unless `src` is in host memory (kDLCPU or kDLCUDAHost).
void check_host_source(const ArrayView& src);

// Copies the elements of the host array `src` (any strides, gathered C-contiguous first when it is not) into `out`
// (a C-contiguous tensor of src's shape and dtype, made by the caller with DeviceTensor::empty: jitbridge.asarray
// allocates it with the GIL, through a Python allocator if one applies) on `stream`
// (cuMemcpyHtoDAsync; `out` keeps stream.keepalive as its allocation stream when made on it), which the host then
// waits for (cuStreamSynchronize): a source in pinned memory is read by the DMA after the call returns, and the
// caller may change or free `src` as soon as this returns. Touches no Python object (callable without the GIL).
// Throws InteropError(value) for a source that is not host memory or an `out` of another size or dtype width,
// std::bad_alloc, and what the driver throws.
void upload(const ArrayView& src, const DeviceTensor& out, const StreamRef& stream);

}  // namespace jitbridge
