// gpu_or_skip.hpp — what GPU test cases share: the driver when a GPU is present, else a stated skip
// (or a failure when JITBRIDGE_REQUIRE_GPU=1, as on the GPU machine).
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "jitbridge/device.hpp"

namespace jitbridge::testing {

inline bool gpu_required() {
  const char* v = std::getenv("JITBRIDGE_REQUIRE_GPU");
  return v && std::string(v) == "1";
}

// The driver, or nullptr after a Catch2 WARN saying why the test is skipped.
inline const DriverApi* driver_or_skip() {
  std::string why;
  const DriverApi* api = try_driver(&why);
  if (api && Device::count() == 0) why = "the CUDA driver sees no GPU";
  if (!api || Device::count() == 0) {
    if (gpu_required()) FAIL("JITBRIDGE_REQUIRE_GPU=1 but no GPU: " << why);
    WARN("skipped: " << why);
    return nullptr;
  }
  return api;
}

}  // namespace jitbridge::testing
