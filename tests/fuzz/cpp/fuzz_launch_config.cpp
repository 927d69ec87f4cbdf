// fuzz_launch_config.cpp — libFuzzer target: launch configurations (grid, block, cluster, dynamic shared memory,
// cooperative, programmatic dependent) through validate_launch and launch() on the fake GPU of fake_cuda.cpp
// (run with LD_LIBRARY_PATH naming its libcuda.so.1). Checked against ref::judge_launch; an accepted
// configuration must reach the driver exactly as given, with the packed parameters.
#include <cstring>

#include "../fake_cuda/fake_cuda.h"
#include "fuzz_support.hpp"
#include "jitbridge/device.hpp"
#include "jitbridge/launch.hpp"
#include "jitbridge/module.hpp"
#include "reference_launch.hpp"

#include <fmt/format.h>

using namespace jitbridge;

namespace {

struct Setup {
  const Device* device = nullptr;
  std::shared_ptr<Module> module;
  std::shared_ptr<Function> function;
  ArrayView array;
  ArgBuffer args;
  Setup() {
    try {
      device = &Device::get(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz_launch_config needs the fake libcuda.so.1 on LD_LIBRARY_PATH: %s\n", e.what());
      std::exit(2);
    }
    auto program = std::make_shared<Program>();
    program->arch = "sm_90";
    program->cubin = "not a real cubin: the fake driver takes anything";
    Kernel k;
    k.name = k.lowered_name = "k";
    Signature sig;
    for (const char* spelling : {"float*", "int"}) {
      Param p;
      p.kind = spelling[std::strlen(spelling) - 1] == '*' ? Param::Kind::pointer : Param::Kind::value;
      p.type = p.kind == Param::Kind::pointer ? "float" : "int";
      p.size = p.kind == Param::Kind::pointer ? 8 : 4;
      p.align = p.size;
      p.spelling = spelling;
      sig.params.push_back(p);
    }
    k.signature = sig;
    program->kernels.push_back(k);
    module = Module::from_program(program);
    function = module->function("k");
    array.data = reinterpret_cast<void*>(0x7f0000001000ull);
    array.device = {kDLCUDA, 0};
    array.shape.resize(1);
    array.shape[0] = 16;
    array.strides.resize(1);
    array.strides[0] = 1;
    launch_detail::Slot slots[2];
    slots[0].value.kind = ArgValue::Kind::array;
    slots[0].value.array = &array;
    slots[1].value.kind = ArgValue::Kind::signed_integer;
    slots[1].value.i = 12345;
    launch_detail::pack_all(*function, slots, 2, 0, args);
  }
};

unsigned fuzzed_dim(FuzzedDataProvider& in, unsigned limit) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return 0;
    case 1: return limit + in.ConsumeIntegralInRange<unsigned>(0, 2) - 1;
    case 2: return static_cast<unsigned>(jbfuzz::edgy_u64(in));
    default: return in.ConsumeIntegralInRange<unsigned>(1, 8);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Setup setup;
  FuzzedDataProvider in(data, size);
  LaunchConfig c;
  jbfuzz::ref::LaunchSpec s;
  unsigned* grid[3] = {&c.grid.x, &c.grid.y, &c.grid.z};
  unsigned* block[3] = {&c.block.x, &c.block.y, &c.block.z};
  unsigned* cluster[3] = {&c.cluster.x, &c.cluster.y, &c.cluster.z};
  for (int i = 0; i < 3; ++i) {
    *grid[i] = fuzzed_dim(in, static_cast<unsigned>(fake_cuda::kMaxGridDim[i]));
    *block[i] = fuzzed_dim(in, static_cast<unsigned>(fake_cuda::kMaxBlockDim[i]));
  }
  if (in.ConsumeBool())
    for (int i = 0; i < 3; ++i) *cluster[i] = in.ConsumeBool() ? in.ConsumeIntegralInRange<unsigned>(0, 5) : fuzzed_dim(in, 16);
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: c.shared_mem = 0; break;
    case 1:
      c.shared_mem = static_cast<std::size_t>(fake_cuda::kMaxSharedOptin - fake_cuda::kKernelStaticShared) +
                     in.ConsumeIntegralInRange<std::size_t>(0, 2) - 1;
      break;
    case 2: c.shared_mem = jbfuzz::edgy_u64(in); break;
    default: c.shared_mem = in.ConsumeIntegralInRange<std::size_t>(0, 100000);
  }
  c.cooperative = in.ConsumeBool();
  c.programmatic_dependent = in.ConsumeBool();
  for (int i = 0; i < 3; ++i) {
    s.grid[i] = *grid[i];
    s.block[i] = *block[i];
    s.cluster[i] = *cluster[i];
  }
  s.shared_mem = c.shared_mem;
  s.cooperative = c.cooperative;
  s.programmatic = c.programmatic_dependent;
  const std::string why = jbfuzz::ref::judge_launch(s);
  const std::string shown = fmt::format("grid ({}, {}, {}) block ({}, {}, {}) cluster ({}, {}, {}) shared {} coop {} pdl {}",
                                        c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.cluster.x,
                                        c.cluster.y, c.cluster.z, c.shared_mem, c.cooperative, c.programmatic_dependent);
  try {
    validate_launch(*setup.function, c, *setup.device);
  } catch (const LaunchConfigError& e) {
    if (why.empty()) jbfuzz::finding("wrong-refusal", fmt::format("validate_launch: {}: {}", e.what(), shown));
    return 0;
  } catch (const std::exception& e) {
    jbfuzz::finding("bad-exception", fmt::format("validate_launch threw {}: {}", e.what(), shown));
  }
  if (!why.empty()) jbfuzz::finding("wrong-acceptance", fmt::format("validate_launch accepted although {}: {}", why, shown));

  FakeCudaLaunch before{}, after{};
  fake_cuda_last_launch(&before);
  try {
    launch(*setup.function, c, *setup.device, setup.args);
  } catch (const std::exception& e) {
    jbfuzz::finding("bad-exception", fmt::format("launch threw {}: {}", e.what(), shown));
  }
  fake_cuda_last_launch(&after);
  const bool has_cluster = c.cluster.x != 0;
  const bool same = after.count == before.count + 1 && after.grid[0] == c.grid.x && after.grid[1] == c.grid.y &&
                    after.grid[2] == c.grid.z && after.block[0] == c.block.x && after.block[1] == c.block.y &&
                    after.block[2] == c.block.z && after.shared_mem == c.shared_mem &&
                    after.cluster[0] == (has_cluster ? c.cluster.x : 0) && after.cluster[1] == (has_cluster ? c.cluster.y : 0) &&
                    after.cluster[2] == (has_cluster ? c.cluster.z : 0) && (after.cooperative != 0) == c.cooperative &&
                    (after.programmatic != 0) == c.programmatic_dependent && after.pointer_form &&
                    !after.buffer_form;  // an ArgBuffer's pointers (the made-up image tells the fake no sizes)
  if (!same) jbfuzz::finding("wrong-result", "the driver received another launch than configured: " + shown);
  return 0;
}
