// device_tensor.cpp — jitbridge's output arrays: allocation, zero fill and copies, all queued in stream order.
#include "jitbridge/device_tensor.hpp"

#include <fmt/format.h>

#include "jitbridge/device.hpp"
#include "jitbridge/driver.hpp"

namespace jitbridge {

DeviceTensor DeviceTensor::empty(const Dims& shape, DLDataType dtype, int device, StreamRef stream,
                                 const DeviceAllocator* allocator) {
  if (itemsize(dtype) == 0)
    throw InteropError(InteropError::Kind::value,
                       fmt::format("dtype {} has no whole-byte item size", dtype_name(dtype)));
  validate_shape(shape, dtype, "");  // from here on the sizes below cannot overflow
  DeviceTensor t;
  t.view_.device = {kDLCUDA, device};
  t.view_.dtype = dtype;
  t.view_.shape = shape;
  t.view_.strides = contiguous_strides(shape);
  t.buffer_ = allocate_buffer(device, static_cast<std::size_t>(t.view_.nbytes()), std::move(stream), allocator);
  t.view_.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(t.buffer_->ptr()));
  t.view_.owner = t.buffer_;
  validate_view(t.view_, "");  // the driver's address and the size do not wrap
  return t;
}

void DeviceTensor::fill_zero() {
  if (nbytes() == 0) return;
  const DriverApi& api = driver();
  ContextGuard guard(Device::get(device()));
  check(api.cuMemsetD8Async(buffer_->ptr(), 0, nbytes(), stream()), "cuMemsetD8Async");
}

DeviceTensor DeviceTensor::copy() const {
  StreamRef ref = buffer_->stream_ref();
  const CUstream s = ref.handle;
  DeviceTensor out = empty(view_.shape, view_.dtype, device(), std::move(ref));
  if (nbytes() == 0) return out;
  const DriverApi& api = driver();
  ContextGuard guard(Device::get(device()));
  check(api.cuMemcpyDtoDAsync(out.buffer_->ptr(), buffer_->ptr(), nbytes(), s), "cuMemcpyDtoDAsync");
  return out;
}

}  // namespace jitbridge
