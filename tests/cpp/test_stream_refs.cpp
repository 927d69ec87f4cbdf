// test_stream_refs.cpp — StreamRef and DeviceBuffer on the fake driver (tests/fuzz/fake_cuda): a buffer keeps every
// stream it stores alive until its free, and releases them only after the free's driver calls (the fake driver aborts
// on any call naming a destroyed stream). Runs as the ctest `catch2_fake_driver`; with a real driver it skips.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstdint>
#include <memory>

#include "jitbridge/device.hpp"
#include "jitbridge/device_buffer.hpp"
#include "jitbridge/driver.hpp"

using namespace jitbridge;

namespace {

// The fake driver's test entry points (fake_cuda.h), or all null under a real driver.
struct Fake {
  std::uintptr_t (*create)() = nullptr;
  int (*destroy)(std::uintptr_t) = nullptr;
  long (*live_streams)() = nullptr;
  long (*live_allocations)() = nullptr;
};

const Fake* fake_or_skip() {
  static Fake fake;
  static bool looked = false;
  if (!looked) {
    looked = true;
    if (try_driver()) {
      if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
        fake.create = reinterpret_cast<std::uintptr_t (*)()>(dlsym(lib, "fake_cuda_stream_create"));
        fake.destroy = reinterpret_cast<int (*)(std::uintptr_t)>(dlsym(lib, "fake_cuda_stream_destroy"));
        fake.live_streams = reinterpret_cast<long (*)()>(dlsym(lib, "fake_cuda_live_streams"));
        fake.live_allocations = reinterpret_cast<long (*)()>(dlsym(lib, "fake_cuda_live_allocations"));
      }
    }
  }
  if (!fake.create || !fake.destroy || !fake.live_streams || !fake.live_allocations) {
    WARN("skipped: the fake driver is not loaded (ctest runs these as catch2_fake_driver)");
    return nullptr;
  }
  return &fake;
}

// A stream owned like a framework's: destroyed when the last keepalive goes. Records how many allocations
// were live at that moment (the buffer's free must already have happened).
struct OwnedStream {
  CUstream handle = nullptr;
  std::shared_ptr<const void> keepalive;
  std::shared_ptr<long> allocations_when_destroyed = std::make_shared<long>(-1);

  explicit OwnedStream(const Fake& f) {
    const std::uintptr_t h = f.create();
    handle = reinterpret_cast<CUstream>(h);
    const Fake* fp = &f;
    std::shared_ptr<long> seen = allocations_when_destroyed;
    keepalive = std::shared_ptr<const void>(new int(0), [fp, h, seen](const int* p) {
      *seen = fp->live_allocations();
      fp->destroy(h);
      delete p;
    });
  }
  StreamRef ref() const { return StreamRef(handle, keepalive); }
};

}  // namespace

TEST_CASE("a buffer keeps its allocation stream until after its free", "[fake_driver]") {
  const Fake* f = fake_or_skip();
  if (!f) return;
  const long streams = f->live_streams(), allocations = f->live_allocations();
  OwnedStream s(*f);
  auto buffer = DeviceBuffer::allocate(0, 4096, s.ref());
  REQUIRE(buffer->ptr() != 0);
  CHECK(buffer->allocation_stream() == s.handle);
  std::weak_ptr<const void> watch = s.keepalive;
  s.keepalive.reset();  // the framework drops its stream object
  CHECK_FALSE(watch.expired());
  CHECK(f->live_streams() == streams + 1);
  buffer.reset();  // frees on the stream, then releases it
  CHECK(watch.expired());
  CHECK(*s.allocations_when_destroyed == allocations);  // the free came first
  CHECK(f->live_streams() == streams);
  CHECK(f->live_allocations() == allocations);
}

TEST_CASE("a buffer keeps every stream it was handed to until after its free", "[fake_driver]") {
  const Fake* f = fake_or_skip();
  if (!f) return;
  const long allocations = f->live_allocations();
  OwnedStream a(*f), b(*f), c(*f);
  auto buffer = DeviceBuffer::allocate(0, 4096, a.ref());
  buffer->hand_to(b.ref());
  buffer->hand_to(c.ref());
  buffer->hand_to(b.ref());  // again: recorded once
  buffer->hand_to(StreamRef(CU_STREAM_LEGACY));
  CHECK(buffer->stream() == CU_STREAM_LEGACY);
  std::weak_ptr<const void> wa = a.keepalive, wb = b.keepalive, wc = c.keepalive;
  a.keepalive.reset();
  b.keepalive.reset();
  c.keepalive.reset();
  CHECK_FALSE(wa.expired());
  CHECK_FALSE(wb.expired());
  CHECK_FALSE(wc.expired());
  CHECK(wb.use_count() == 1);  // the users list holds b once
  buffer.reset();
  CHECK((wa.expired() && wb.expired() && wc.expired()));
  for (const OwnedStream* s : {&a, &b, &c}) CHECK(*s->allocations_when_destroyed == allocations);
}

TEST_CASE("a handle recorded unowned takes the keepalive it is later handed with", "[fake_driver]") {
  const Fake* f = fake_or_skip();
  if (!f) return;
  OwnedStream s(*f);
  auto buffer = DeviceBuffer::allocate(0, 256, StreamRef(CU_STREAM_LEGACY));
  buffer->hand_to(StreamRef(s.handle));  // unowned (a raw int), while s is still alive
  buffer->hand_to(StreamRef(CU_STREAM_LEGACY));
  buffer->hand_to(s.ref());  // the same handle, now with its owner
  CHECK(buffer->needs_no_hand_off(s.handle));
  CHECK_FALSE(buffer->needs_no_hand_off(CU_STREAM_PER_THREAD));
  std::weak_ptr<const void> watch = s.keepalive;
  s.keepalive.reset();
  CHECK_FALSE(watch.expired());
  buffer.reset();
  CHECK(watch.expired());
}

TEST_CASE("an empty buffer stores no stream and calls no driver function", "[fake_driver]") {
  const Fake* f = fake_or_skip();
  if (!f) return;
  OwnedStream s(*f);
  auto buffer = DeviceBuffer::allocate(0, 0, s.ref());
  buffer->hand_to(StreamRef(reinterpret_cast<CUstream>(0x1234)));
  CHECK(buffer->ptr() == 0);
  CHECK(buffer->needs_no_hand_off(reinterpret_cast<CUstream>(0x5678)));
  std::weak_ptr<const void> watch = s.keepalive;
  s.keepalive.reset();
  CHECK(watch.expired());  // nothing kept it
}

TEST_CASE("StreamRef normalizes the legacy stream's spellings", "[streams]") {
  CHECK(StreamRef().handle == CU_STREAM_LEGACY);
  CHECK(StreamRef(nullptr).handle == CU_STREAM_LEGACY);
  CHECK(StreamRef(CU_STREAM_PER_THREAD).handle == CU_STREAM_PER_THREAD);
  CHECK_FALSE(StreamRef(reinterpret_cast<CUstream>(0x1234)).keepalive);
}
