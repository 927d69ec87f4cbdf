// jitbridge/device_buffer.hpp — device memory allocated and freed in stream order (cuMemAllocAsync /
// cuMemFreeAsync), which remembers every stream it was handed to so that the free waits for them.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "jitbridge/streams.hpp"

namespace jitbridge {

class DeviceBuffer {
 public:
  // `bytes` of memory on `device`, allocated in stream order on `stream` (cuMemAllocAsync from the
  // device's current memory pool, with its primary context current): the memory may be used by work
  // queued on `stream` from now on; other streams must first wait for `stream` (hand_to does that).
  // bytes == 0 allocates nothing (ptr() == 0) and calls no driver function; the buffer then stores
  // no stream at all (nothing will ever be queued for it). Otherwise it keeps `stream` (and so its
  // keepalive) until it is destroyed.
  // Throws NoDriverError, DriverError (CUDA_ERROR_OUT_OF_MEMORY among others), std::out_of_range.
  static std::shared_ptr<DeviceBuffer> allocate(int device, std::size_t bytes, StreamRef stream);

  // Gives `ptr` back: called once, by the destructor, with the stream the free must be ordered on (the
  // allocation stream, which by then waits for every stream the buffer was handed to). Must not throw
  // (an exception is swallowed); may run on any thread, with or without the GIL, after the driver is gone.
  using Release = std::function<void(CUdeviceptr ptr, std::size_t bytes, const StreamRef& stream)>;

  // `bytes` (> 0) of memory at `ptr` on `device` that another allocator allocated, usable by work queued
  // on `stream`: the buffer orders and hands it off as one from allocate() and, instead of
  // cuMemFreeAsync, calls `release` when it goes (release is never called if adopt throws: the caller
  // still owns ptr then). Throws std::bad_alloc.
  static std::shared_ptr<DeviceBuffer> adopt(int device, CUdeviceptr ptr, std::size_t bytes, StreamRef stream,
                                             Release release);

  // Frees in stream order: each stream the buffer was handed to gets an event that the allocation
  // stream waits for, then cuMemFreeAsync runs on the allocation stream, inside a ContextGuard. Work
  // already queued on any of those streams keeps valid memory; nothing waits on the host. Every
  // driver result is checked: a stream that cannot be waited for makes the free wait for the whole
  // context on the host first (cuCtxSynchronize); a failed cuMemFreeAsync is retried on the legacy
  // stream after cuCtxSynchronize. The streams' keepalives are released only after these driver
  // calls (they are members, destroyed after this body). An adopted buffer calls its Release with the
  // allocation stream in place of cuMemFreeAsync (even without a driver: the allocator's own object
  // must be released). Never throws (at interpreter exit the driver may already be gone; the context
  // then takes the memory with it).
  ~DeviceBuffer();

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const noexcept { return ptr_; }
  std::size_t bytes() const noexcept { return bytes_; }
  int device() const noexcept { return device_; }
  CUstream allocation_stream() const noexcept { return allocation_stream_.handle; }

  // The stream the contents are ordered on: the allocation stream, later the stream it was last
  // handed to. Thread-safe.
  CUstream stream() const;
  // The same with its keepalive, for a new object ordered on that stream (a copy). Thread-safe.
  StreamRef stream_ref() const;

  // Hands the buffer to `consumer` for work about to be queued there: `consumer` waits for stream()
  // (an event; no host sync), becomes stream(), and the free will wait for what gets queued on it.
  // Nothing happens when same_stream(consumer, stream()) or the buffer is empty. The buffer keeps
  // `consumer` (its keepalive) until it is destroyed; an unowned consumer (empty keepalive, not an
  // immortal stream) must outlive the buffer, as with torch's Tensor.record_stream. A handle already
  // recorded without a keepalive takes the keepalive given now. Thread-safe.
  // Throws NoDriverError, DriverError.
  void hand_to(const StreamRef& consumer);

  // Whether hand_to(s) would do nothing (same_stream(s, stream()) or an empty buffer): callers that
  // must find out what keeps `s` alive ask this first, so the same-stream path stays cheap.
  bool needs_no_hand_off(CUstream s) const;

 private:
  DeviceBuffer(int device, std::size_t bytes, StreamRef stream) noexcept
      : device_(device), bytes_(bytes), allocation_stream_(stream), stream_(std::move(stream)) {}

  int device_;
  std::size_t bytes_;
  CUdeviceptr ptr_ = 0;
  StreamRef allocation_stream_;     // the free is queued here (needed until the destructor's end)
  mutable std::mutex mutex_;
  StreamRef stream_;                // guarded by mutex_
  std::vector<StreamRef> users_;    // guarded by mutex_: streams other than the allocation stream it was handed to
  Release release_;                 // adopted memory: how it goes back to its allocator (empty: cuMemFreeAsync)
};

}  // namespace jitbridge
