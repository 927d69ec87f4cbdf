// host_copy.cpp — host copies of device tensors and uploads of host arrays (host_copy.hpp), in stream order.
#include "jitbridge/host_copy.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "jitbridge/device.hpp"
#include "jitbridge/streams.hpp"

namespace jitbridge {
namespace {

constexpr std::size_t kHostAlign = 256;
// Buffers from this size up are aligned to, and advised to use, 2 MiB pages (as NumPy does for its own large
// arrays): a device-to-host copy into a fresh buffer otherwise spends most of its time in 4 KiB page faults
// (measured on an H100: 256 MiB at 1.3 GB/s against cupy.asnumpy's 3.8 GB/s into a NumPy array).
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugePageFrom = std::size_t{4} << 20;

// Copies the elements of the strided host view `src` (valid, non-empty) in C order to `out`.
void gather(const ArrayView& src, unsigned char* out) {
  const std::size_t item = itemsize(src.dtype);
  const std::size_t nd = src.shape.size();
  const auto* base = static_cast<const unsigned char*>(src.ptr());
  // the innermost dimension's elements as one run when they are adjacent
  const bool inner_run = nd > 0 && (src.strides[nd - 1] == 1 || src.shape[nd - 1] == 1);
  const std::size_t outer = inner_run ? nd - 1 : nd;
  const std::size_t run = inner_run ? static_cast<std::size_t>(src.shape[nd - 1]) * item : item;
  std::vector<std::int64_t> index(outer, 0);
  for (;;) {
    std::int64_t offset = 0;  // in elements; a valid view's offsets fit (validate_view)
    for (std::size_t d = 0; d < outer; ++d) offset += index[d] * src.strides[d];
    std::memcpy(out, base + offset * static_cast<std::int64_t>(item), run);
    out += run;
    std::size_t d = outer;
    while (d > 0) {
      --d;
      if (++index[d] < src.shape[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (outer == 0) return;
  }
}

}  // namespace

HostBuffer::HostBuffer(std::size_t bytes) : bytes_(bytes) {
  const std::size_t align = bytes >= kHugePageFrom ? kHugePage : kHostAlign;
  const std::size_t rounded = bytes <= align ? align : (bytes + align - 1) / align * align;
  if (rounded < bytes) throw std::bad_alloc();
  data_ = std::aligned_alloc(align, rounded);
  if (!data_) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only: a kernel without transparent huge pages refuses it, and the buffer works as it is.
  if (align == kHugePage) (void)madvise(data_, rounded, MADV_HUGEPAGE);
#endif
}

HostBuffer::~HostBuffer() { std::free(data_); }

ArrayView copy_to_host(const DeviceTensor& t, CUstream stream) {
  const std::size_t bytes = t.nbytes();
  auto host = std::make_shared<HostBuffer>(bytes);
  ArrayView out;
  out.device = {kDLCPU, 0};
  out.dtype = t.view().dtype;
  out.shape = t.view().shape;
  out.strides = t.view().strides;
  out.data = host->data();
  out.owner = host;
  if (bytes == 0) return out;
  stream_wait(t.device(), stream, t.stream());
  const DriverApi& api = driver();
  ContextGuard guard(Device::get(t.device()));
  check(api.cuMemcpyDtoHAsync(host->data(), t.buffer()->ptr(), bytes, stream), "cuMemcpyDtoHAsync");
  check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
  return out;
}

void check_host_source(const ArrayView& src) {
  if (src.device.device_type != kDLCPU && src.device.device_type != kDLCUDAHost)
    throw InteropError(InteropError::Kind::value,
                       fmt::format("the array is in {} memory, not host memory", device_name(src.device)));
}

void upload(const ArrayView& src, const DeviceTensor& out, const StreamRef& stream) {
  check_host_source(src);
  const std::size_t bytes = out.nbytes();
  if (static_cast<std::size_t>(src.nbytes()) != bytes || out.view().dtype.bits != src.dtype.bits)
    throw InteropError(InteropError::Kind::value, "upload: the tensor does not have the source's size and dtype");
  if (bytes == 0) return;
  std::unique_ptr<HostBuffer> gathered;
  const void* from = src.ptr();
  if (!src.is_c_contiguous()) {
    gathered = std::make_unique<HostBuffer>(bytes);
    gather(src, static_cast<unsigned char*>(gathered->data()));
    from = gathered->data();
  }
  const DriverApi& api = driver();
  ContextGuard guard(Device::get(out.device()));
  check(api.cuMemcpyHtoDAsync(out.buffer()->ptr(), from, bytes, stream.handle), "cuMemcpyHtoDAsync");
  // Pinned memory (also exported as kDLCPU by some producers) and our gathered copy are read by
  // the DMA after cuMemcpyHtoDAsync returns: wait, so `src` may change or go once this returns.
  check(api.cuStreamSynchronize(stream.handle), "cuStreamSynchronize");
}

}  // namespace jitbridge
