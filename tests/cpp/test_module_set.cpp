// test_module_set.cpp — ModuleSet on the GPU at hand: a module per target built from the request (a second
// architecture forced through module_for_target, since one GPU kind cannot show two), an explicit arch refused with
// CUDA's rule. Skips without a GPU.
#include <catch2/catch.hpp>

#include "gpu_or_skip.hpp"

#include <stdexcept>

#include "jitbridge/cache.hpp"
#include "jitbridge/module_set.hpp"
#include "jitbridge/targets.hpp"

using namespace jitbridge;
using jitbridge::testing::driver_or_skip;

namespace {
const char* kSource = "extern \"C\" __global__ void k(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] = 1; }";
}

TEST_CASE("GPU: a default-arch program builds one module per target, each with the same signature") {
  if (!driver_or_skip()) return;
  const Device& device = Device::get(0);
  const std::string native = native_target(device.limits().cc_major, device.limits().cc_minor);
  Cache cache(CacheConfig{false, "", 1 << 20});
  ModuleSet set(compile(kSource, CompileOptions{}, &cache), &cache);
  const Module& own = set.module_for(device);
  CHECK(&set.module_for(device) == &own);
  CHECK(own.program()->arch == native);
  const std::string specific = native + "a", virtual_target = "compute_" + native.substr(3);
  const Module& a = set.module_for_target(specific);
  const Module& ptx = set.module_for_target(virtual_target);
  CHECK(set.targets() == std::vector<std::string>{native, specific, virtual_target});
  CHECK(a.program()->arch == specific);
  CHECK(ptx.program()->cubin.empty());
  CHECK(&set.module_for_target(specific) == &a);  // built once
  for (const Module* m : {&own, &a, &ptx}) {
    auto f = m->function("k");
    CHECK(f->param_sizes() == std::vector<std::size_t>{8, 4});
    CHECK(f->info()->signature->to_string() == "(float*, int)");
  }
  CHECK(own.library() != a.library());
}

TEST_CASE("GPU: an explicit arch that cannot run on the device is refused with the rule") {
  if (!driver_or_skip()) return;
  const Device& device = Device::get(0);
  const int major = device.limits().cc_major;
  CompileOptions o;
  o.arch = major == 8 ? "sm_90" : "sm_80";
  ModuleSet set(compile(kSource, o));
  try {
    set.module_for(device);
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("arch='" + o.arch + "': " + o.arch + " code runs only on compute capability"));
    CHECK_THAT(e.what(), Catch::Contains("cuda:0 is " + std::to_string(major) + "."));
  }
  CHECK(set.targets().empty());
  o.arch = "compute_75";  // PTX runs on any later GPU
  ModuleSet ptx(compile(kSource, o));
  CHECK(ptx.module_for(device).program()->arch == "compute_75");
}

TEST_CASE("ModuleSet refuses what it cannot build") {
  CHECK_THROWS_AS(ModuleSet(std::string()), std::invalid_argument);
  CHECK_THROWS_AS(ModuleSet(std::shared_ptr<const Program>()), std::invalid_argument);
  ModuleSet image(std::string("not loaded yet"));
  CHECK_THROWS_AS(image.module_for_target("sm_90"), std::logic_error);
  auto bare = std::make_shared<Program>(*compile(kSource, CompileOptions{}));
  bare->request = nullptr;
  ModuleSet no_request(bare);
  CHECK_THROWS_WITH(no_request.module_for_target("sm_80"), Catch::Contains("was not made by compile()"));
  ModuleSet with_request(compile(kSource, CompileOptions{}));
  CHECK_THROWS_WITH(with_request.module_for_target("sm_9"), Catch::Contains("'sm_9' is not a CUDA target"));
}
