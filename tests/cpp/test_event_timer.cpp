// test_event_timer.cpp — EventTimer: no driver is a clear error; on a GPU, samples in order, misuse refused, flushes.
#include <catch2/catch.hpp>

#include "gpu_or_skip.hpp"

#include "jitbridge/event_timer.hpp"

using namespace jitbridge;
using jitbridge::testing::driver_or_skip;

TEST_CASE("EventTimer: NoDriverError without a driver, invalid_argument for a device that does not exist") {
  if (!try_driver()) {
    CHECK_THROWS_AS(EventTimer(0, nullptr), NoDriverError);
    return;
  }
  if (Device::count() > 0) CHECK_THROWS_AS(EventTimer(Device::count(), nullptr), std::invalid_argument);
}

TEST_CASE("EventTimer: each sample's GPU time, in order; a larger flush inside a sample takes longer [gpu]") {
  if (!driver_or_skip()) return;
  EventTimer timer(0, nullptr);
  CHECK(timer.stream() == CU_STREAM_LEGACY);
  const std::size_t l2 = timer.l2_cache_bytes();
  CHECK(l2 >= (1u << 20));  // every GPU jitbridge runs on has at least 1 MiB
  CHECK(timer.elapsed_ms().empty());
  CHECK_THROWS_AS(timer.stop(), std::logic_error);
  // Sample 0: an empty interval; sample 1: writes 64 x the L2 size; sample 2: 1 x (the buffer is reused).
  timer.start();
  CHECK_THROWS_AS(timer.start(), std::logic_error);
  CHECK_THROWS_AS(timer.elapsed_ms(), std::logic_error);
  timer.stop();
  timer.start();
  timer.flush_l2(64 * l2);
  timer.stop();
  timer.start();
  timer.flush_l2(l2);
  timer.stop();
  REQUIRE(timer.samples() == 3);
  const std::vector<float> ms = timer.elapsed_ms();
  REQUIRE(ms.size() == 3);
  for (float v : ms) CHECK(v >= 0.0f);
  CHECK(ms[1] > ms[0]);
  CHECK(ms[1] > ms[2]);
  timer.flush_l2(l2);
  timer.synchronize();  // the flush queued after the last sample is done
  timer.clear();
  CHECK(timer.samples() == 0);
  timer.start();
  timer.stop();
  CHECK(timer.elapsed_ms().size() == 1);
}
