// test_c_api_allocator.cpp — the C interface's 1.1 entries alloc_async / free_async and the allocator choice under
// them (interop/device_allocator.hpp: process-wide, per-thread scope, DeviceBuffer::adopt), on the fake driver.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "c_api_support.hpp"
#include "jitbridge/c_api.h"
#include "jitbridge/device_allocator.hpp"
#include "jitbridge/device_tensor.hpp"

extern "C" int c_check_minor_sizes(char* why, std::size_t size);

using jitbridge_test::c_api;
using jitbridge_test::message;

namespace {

long live_allocations() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib);
  auto read = reinterpret_cast<long (*)()>(dlsym(lib, "fake_cuda_live_allocations"));
  REQUIRE(read);
  const long n = read();
  dlclose(lib);
  return n;
}

// Hands out made-up aligned addresses and records what comes back, with the stream of each release.
struct Recording final : jitbridge::DeviceAllocator {
  mutable std::mutex mutex;
  mutable std::vector<std::uint64_t> allocated;
  mutable std::vector<std::pair<std::uint64_t, CUstream>> released;
  mutable std::uint64_t next = 0x7f0000000000;

  std::shared_ptr<jitbridge::DeviceBuffer> allocate(int device, std::size_t bytes,
                                                    const jitbridge::StreamRef& stream) const override {
    std::lock_guard<std::mutex> lock(mutex);
    const std::uint64_t p = next;
    next += (bytes + 0xfff) & ~std::uint64_t{0xfff};
    allocated.push_back(p);
    auto* self = this;
    return jitbridge::DeviceBuffer::adopt(device, p, bytes, stream,
                                          [self](CUdeviceptr ptr, std::size_t, const jitbridge::StreamRef& on) {
                                            std::lock_guard<std::mutex> l(self->mutex);
                                            self->released.emplace_back(ptr, on.handle);
                                          });
  }
};

jitbridge::Dims dims(std::initializer_list<std::int64_t> v) { return jitbridge::Dims(v.begin(), v.size()); }

}  // namespace

TEST_CASE("c_api 1.1: a 1.0 consumer takes a 1.0-sized table; a 1.1 consumer refuses it") {
  char why[256] = "";
  CHECK(c_check_minor_sizes(why, sizeof why) == 1);
  CHECK_THAT(why, Catch::Contains("fewer than"));
}

TEST_CASE("c_api 1.1: alloc_async without a configured allocator is jitbridge's pool; free_async checks its pointers") {
  const long before = live_allocations();
  std::uint64_t p = 0;
  REQUIRE(c_api().alloc_async(0, 1000, nullptr, &p) == JITBRIDGE_OK);
  CHECK(p != 0);
  CHECK(live_allocations() == before + 1);
  CHECK(c_api().free_async(0, p + 8, nullptr) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("free_async") && Catch::Contains("not from alloc_async"));
  CHECK(c_api().free_async(1, p, nullptr) == JITBRIDGE_ERROR_VALUE);  // another device's key
  CHECK(c_api().free_async(0, p, nullptr) == JITBRIDGE_OK);
  CHECK(live_allocations() == before);
  CHECK(c_api().free_async(0, p, nullptr) == JITBRIDGE_ERROR_VALUE);  // twice
  CHECK(c_api().free_async(0, 0, nullptr) == JITBRIDGE_OK);
  std::uint64_t none = 5;
  CHECK(c_api().alloc_async(0, 0, nullptr, &none) == JITBRIDGE_OK);
  CHECK(none == 0);
  CHECK(c_api().alloc_async(0, 16, nullptr, nullptr) == JITBRIDGE_ERROR_VALUE);
  CHECK(c_api().alloc_async(99, 16, nullptr, &p) == JITBRIDGE_ERROR_VALUE);
  CHECK_THAT(message(), Catch::Contains("alloc_async"));
}

TEST_CASE("c_api 1.1: alloc_async / free_async use the process-wide allocator, released on the allocation stream") {
  auto rec = std::make_shared<Recording>();
  REQUIRE(jitbridge::set_global_allocator(rec) == nullptr);
  const long before = live_allocations();
  std::uint64_t p = 0, q = 0;
  REQUIRE(c_api().alloc_async(0, 4096, nullptr, &p) == JITBRIDGE_OK);
  // another thread (no scope of its own) uses the same process-wide allocator
  std::thread([&] { REQUIRE(c_api().alloc_async(0, 100, nullptr, &q) == JITBRIDGE_OK); }).join();
  CHECK(live_allocations() == before);  // nothing from the driver's pool
  REQUIRE(rec->allocated.size() == 2);
  CHECK((rec->allocated[0] == p && rec->allocated[1] == q));
  CHECK(c_api().free_async(0, q, nullptr) == JITBRIDGE_OK);
  CHECK(c_api().free_async(0, p, nullptr) == JITBRIDGE_OK);
  REQUIRE(rec->released.size() == 2);
  CHECK((rec->released[0].first == q && rec->released[1].first == p));
  CHECK(rec->released[1].second == CU_STREAM_LEGACY);
  CHECK(jitbridge::set_global_allocator(nullptr) == rec);
}

TEST_CASE("allocators: a thread's scope overrides the process-wide one there only, and is restored") {
  using namespace jitbridge;
  auto global = std::make_shared<Recording>(), scoped = std::make_shared<Recording>();
  set_global_allocator(global);
  const DLDataType f32{kDLFloat, 32, 1};
  {
    AllocatorScope previous = set_thread_allocator({true, scoped});
    DeviceTensor a = DeviceTensor::empty(dims({4}), f32, 0, StreamRef());
    std::thread([&] { DeviceTensor b = DeviceTensor::empty(dims({8}), f32, 0, StreamRef()); }).join();
    CHECK(scoped->allocated.size() == 1);
    CHECK(global->allocated.size() == 1);  // the other thread
    CHECK(global->released.size() == 1);
    AllocatorScope inner = set_thread_allocator({true, nullptr});  // a scope of jitbridge's own pool
    const long before = live_allocations();
    { DeviceTensor c = DeviceTensor::empty(dims({4}), f32, 0, StreamRef()); CHECK(live_allocations() == before + 1); }
    CHECK(live_allocations() == before);
    set_thread_allocator(std::move(inner));
    set_thread_allocator(std::move(previous));
    CHECK_FALSE(thread_allocator().scoped);
  }
  CHECK(scoped->released.size() == 1);  // `a`, when it went
  DeviceTensor d = DeviceTensor::empty(dims({0, 3}), f32, 0, StreamRef());  // empty: no allocator call
  CHECK(global->allocated.size() == 1);
  set_global_allocator(nullptr);
}
