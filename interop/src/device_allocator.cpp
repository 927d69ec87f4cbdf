// device_allocator.cpp — the global and per-thread allocator choice, and allocation through whichever applies.
#include "jitbridge/device_allocator.hpp"

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "jitbridge/device.hpp"

namespace jitbridge {
namespace {

struct Global {
  std::mutex mutex;
  std::shared_ptr<DeviceAllocator> allocator;  // guarded by mutex
  std::atomic<bool> set{false};                // allocator != null: lets the common case skip the mutex
};

Global& global() {
  static Global* g = new Global();  // leaked: buffers may be allocated from static destructors' threads
  return *g;
}

thread_local AllocatorScope t_scope;

}  // namespace

std::shared_ptr<DeviceAllocator> set_global_allocator(std::shared_ptr<DeviceAllocator> allocator) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.set.store(allocator != nullptr, std::memory_order_release);
  g.allocator.swap(allocator);
  return allocator;  // the previous one, released by the caller (outside the lock)
}

std::shared_ptr<DeviceAllocator> global_allocator() {
  Global& g = global();
  if (!g.set.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(g.mutex);
  return g.allocator;
}

AllocatorScope set_thread_allocator(AllocatorScope scope) {
  std::swap(t_scope, scope);
  return scope;
}

const AllocatorScope& thread_allocator() noexcept { return t_scope; }

std::shared_ptr<DeviceAllocator> current_allocator() {
  return t_scope.scoped ? t_scope.allocator : global_allocator();
}

std::shared_ptr<DeviceBuffer> allocate_buffer(int device, std::size_t bytes, StreamRef stream,
                                              const DeviceAllocator* allocator) {
  std::shared_ptr<DeviceAllocator> current;
  if (!allocator && bytes != 0) {
    current = current_allocator();
    allocator = current.get();
  }
  if (!allocator || bytes == 0) return DeviceBuffer::allocate(device, bytes, std::move(stream));
  ContextGuard guard(Device::get(device));
  std::shared_ptr<DeviceBuffer> buffer = allocator->allocate(device, bytes, stream);
  if (!buffer || !buffer->ptr() || buffer->bytes() < bytes || buffer->device() != device)
    throw std::logic_error("a DeviceAllocator returned no buffer, or one of another size or device");
  return buffer;
}

}  // namespace jitbridge
