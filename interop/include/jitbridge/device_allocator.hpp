// jitbridge/device_allocator.hpp — where jitbridge's own output buffers come from: the built-in stream-ordered pool
// (cuMemAllocAsync) or a configured allocator, chosen per call, per thread (a scope) or for the process.
#pragma once

#include <cstddef>
#include <memory>

#include "jitbridge/device_buffer.hpp"

namespace jitbridge {

// An allocator of device memory for DeviceBuffers. Implementations return DeviceBuffer::adopt(...) with a Release
// that gives the memory back in order on the stream it is handed (the Python allocators of python/src/interop/
// allocators.cpp do). Must be thread-safe: any thread may allocate, and buffers may be freed on any thread.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // `bytes` (> 0) on `device`, usable by work queued on `stream` from now on. Called with `device`'s primary
  // context current. Throws what the allocator throws (its own errors, std::bad_alloc, DriverError...).
  virtual std::shared_ptr<DeviceBuffer> allocate(int device, std::size_t bytes, const StreamRef& stream) const = 0;
};

// The process-wide allocator (null: the built-in pool); returns the previous one. Thread-safe.
std::shared_ptr<DeviceAllocator> set_global_allocator(std::shared_ptr<DeviceAllocator> allocator);
std::shared_ptr<DeviceAllocator> global_allocator();

// The calling thread's scope: an allocator that overrides the global one on this thread only (null while `scoped`:
// the built-in pool). What a scope saves and restores: set_thread_allocator returns the previous state.
struct AllocatorScope {
  bool scoped = false;                         // false: no scope, the global allocator applies
  std::shared_ptr<DeviceAllocator> allocator;  // while scoped; null: the built-in pool
};
AllocatorScope set_thread_allocator(AllocatorScope scope);
const AllocatorScope& thread_allocator() noexcept;

// The allocator that applies on this thread now: its scope's, else the global one (null: the built-in pool).
std::shared_ptr<DeviceAllocator> current_allocator();

// `bytes` on `device` for work on `stream` from `allocator` (null: current_allocator()); bytes == 0 allocates
// nothing and calls no allocator (an empty buffer). The built-in pool is DeviceBuffer::allocate. An allocator is
// called inside a ContextGuard of `device`. Throws what the allocator or DeviceBuffer::allocate throws.
std::shared_ptr<DeviceBuffer> allocate_buffer(int device, std::size_t bytes, StreamRef stream,
                                              const DeviceAllocator* allocator = nullptr);

}  // namespace jitbridge
