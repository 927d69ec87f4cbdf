// launch_bench.cpp — the floor for bench_launch.py: host time of raw cuLaunchKernel calls from C++ for
// k(const float*, const float*, float*, float*, int), grid 1 x block 32, on the legacy default stream.
// Also the same with the parameters as one buffer, jitbridge's typed C++ launch() of the kernel, and launches through
// the C interface (jitbridge/c_api.h: checked, as a native add-on launches), all of one Function (the C interface's
// kernel_from_source copy, its own module, last). They are timed round-robin, one batch of each per round.
// Prints "name_us microseconds" (median) and "ratio_name ratio" (median of per-round ratios to raw) lines;
// bench_c_api.py prints the table. With arguments `--count ROW N` it only runs N launches of one row (raw, cpp, c_api,
// c_api_bare) inside counted_launches() and exits, for instruction counts on the fake driver
// (bench/bench_launch_instructions.py runs it under callgrind).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "jitbridge/c_api.h"
#include "jitbridge/c_api.hpp"
#include "jitbridge/launch.hpp"

using namespace jitbridge;
using Clock = std::chrono::steady_clock;

// `n` calls of `one`: the only frame callgrind collects in --count mode (--toggle-collect).
[[gnu::noinline]] void counted_launches(void (*one)(void*), void* state, long n) {
  for (long i = 0; i < n; ++i) one(state);
}

const char* const kSource =
    "extern \"C\" __global__ void k(const float* a, const float* b, float* c, float* d, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) { c[i] = a[i] + b[i]; d[i] = a[i] * b[i]; }\n}\n";

int main(int argc, char** argv) {
  try {
    const bool count_mode = argc == 4 && std::strcmp(argv[1], "--count") == 0;
    const DriverApi& api = driver();
    const Device& dev = Device::get(0);
    dev.make_current();
    CompileOptions o;
    o.arch = dev.arch();
    auto program = compile(kSource, o);
    // One Function for every row (raw, typed, C interface): the kernel's launch plan resolved on device 0, as
    // kernel_resolve gives it to C, so the rows differ only in how they launch.
    const Kernel* info = program->find_kernel("k");
    if (!info) throw std::runtime_error("no kernel k");
    auto plan = std::make_shared<const KernelPlan>(std::make_shared<const ModuleSet>(program), info->name,
                                                   info->lowered_name, info);
    const Function* function = plan->resolved(dev).function.get();
    CUfunction fn = nullptr;
    check(api.cuKernelGetFunction(&fn, function->handle()), "cuKernelGetFunction");
    CUdeviceptr buf[4];
    for (auto& b : buf) check(api.cuMemAlloc(&b, 32 * sizeof(float)), "cuMemAlloc");
    int n = 32;
    void* params[] = {&buf[0], &buf[1], &buf[2], &buf[3], &n};
    const int batch = 200;
    // Host microseconds per launch over one batch of `one`, started on an idle GPU.
    auto batch_us = [&](auto&& one) {
      check(api.cuCtxSynchronize(), "cuCtxSynchronize");
      auto t0 = Clock::now();
      for (int i = 0; i < batch; ++i) one();
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / batch;
    };
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    for (int warm = 0; warm < 150; ++warm) {
      batch_us([&] { check(api.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, params, nullptr), "launch"); });
    }
    // The same parameters as one buffer (cuLaunchKernel's `extra` form, which jitbridge's launches use).
    unsigned char space[36];
    std::memcpy(space, buf, sizeof buf);
    std::memcpy(space + 32, &n, sizeof n);
    std::size_t space_size = sizeof space;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, space, CU_LAUNCH_PARAM_BUFFER_SIZE, &space_size, CU_LAUNCH_PARAM_END};
    LaunchConfig config;
    config.grid = {1, 1, 1};
    config.block = {32, 1, 1};
    const float* a = reinterpret_cast<const float*>(buf[0]);
    const float* b = reinterpret_cast<const float*>(buf[1]);
    float* c = reinterpret_cast<float*>(buf[2]);
    float* d = reinterpret_cast<float*>(buf[3]);
    // The C interface: a handle over the same plan (as kernel_from_python shares a RawKernel's), resolved on device
    // 0, each array described as a native add-on would (data, device, dtype, 1-d shape), checked against the
    // signature. And the kernel compiled again through the cache (a memory hit) by kernel_from_source, its own
    // module and Function: the last row, to tell the interface's cost from the kernel's.
    char why[256] = "";
    const JitbridgeCApi* capi = jitbridge_c_api_get(JITBRIDGE_C_API_MAJOR, JITBRIDGE_C_API_MINOR, why, sizeof why);
    if (!capi) throw std::runtime_error(why);
    jitbridge_source source{};
    source.struct_size = sizeof source;
    source.source = kSource;
    source.arch = o.arch.c_str();
    jitbridge_kernel* ck = c_api::make_kernel(plan);
    jitbridge_kernel* own = nullptr;
    jitbridge_function *cf = nullptr, *own_f = nullptr;
    const char* message = nullptr;
    if (capi->kernel_resolve(ck, 0, &cf) != JITBRIDGE_OK ||
        capi->kernel_from_source(&source, "k", &own) != JITBRIDGE_OK ||
        capi->kernel_resolve(own, 0, &own_f) != JITBRIDGE_OK) {
      capi->last_error(&message, nullptr);
      throw std::runtime_error(message);
    }
    const std::int64_t shape[1] = {n};
    jitbridge_arg cargs[5] = {};
    for (int i = 0; i < 4; ++i) {
      jitbridge_array& arr = cargs[i].array;
      cargs[i].kind = JITBRIDGE_ARG_ARRAY;
      arr.data = reinterpret_cast<void*>(buf[i]);
      arr.device_type = kDLCUDA;
      arr.dtype_code = kDLFloat;
      arr.dtype_bits = 32;
      arr.dtype_lanes = 1;
      arr.ndim = 1;
      arr.shape = shape;
      arr.readonly = i < 2;
    }
    cargs[4].kind = JITBRIDGE_ARG_INT;
    cargs[4].i = n;
    jitbridge_launch_config cconfig{};
    cconfig.struct_size = sizeof cconfig;
    cconfig.grid[0] = cconfig.grid[1] = cconfig.grid[2] = 1;
    cconfig.block[0] = 32;
    cconfig.block[1] = cconfig.block[2] = 1;
    auto c_api_launch = [&] {
      if (capi->launch(cf, &cconfig, cargs, 5, 0) != JITBRIDGE_OK) {
        capi->last_error(&message, nullptr);
        throw std::runtime_error(message);
      }
    };
    // The same with bare pointers (ndim 0: no shape to read and check), the least a C consumer can describe.
    jitbridge_arg bare[5];
    std::memcpy(bare, cargs, sizeof bare);
    for (int i = 0; i < 4; ++i) {
      bare[i].array.ndim = 0;
      bare[i].array.shape = nullptr;
    }
    auto c_api_bare = [&] {
      if (capi->launch(cf, &cconfig, bare, 5, 0) != JITBRIDGE_OK) {
        capi->last_error(&message, nullptr);
        throw std::runtime_error(message);
      }
    };
    auto c_api_own = [&] {
      if (capi->launch(own_f, &cconfig, cargs, 5, 0) != JITBRIDGE_OK) {
        capi->last_error(&message, nullptr);
        throw std::runtime_error(message);
      }
    };
    if (count_mode) {
      const std::string row = argv[2];
      const long count = std::atol(argv[3]);
      auto run = [&](auto& one) { counted_launches([](void* f) { (*static_cast<decltype(&one)>(f))(); }, &one, count); };
      auto raw = [&] { check(api.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, params, nullptr), "launch"); };
      auto typed = [&] { launch(*function, dev, config, a, b, c, d, n); };
      if (row == "raw") run(raw);
      else if (row == "cpp") run(typed);
      else if (row == "c_api") run(c_api_launch);
      else if (row == "c_api_bare") run(c_api_bare);
      else throw std::runtime_error("--count: no row " + row + " (raw, cpp, c_api, c_api_bare)");
      capi->kernel_release(ck);
      capi->kernel_release(own);
      return 0;
    }
    // Round-robin by batch: each round times one batch of every row, so drift hits the rows alike; each row prints
    // its median, and each jitbridge row also the median over rounds of its ratio to that round's raw batch.
    const char* const names[] = {"raw_culaunchkernel", "raw_culaunchkernel_buffer_form", "jitbridge_cpp_launch",
                                 "jitbridge_c_api_launch", "jitbridge_c_api_launch_bare_pointers",
                                 "jitbridge_c_api_launch_own_module"};
    constexpr int kRows = 6, kRounds = 400;
    std::vector<double> us[kRows];
    for (int round = 0; round < kRounds; ++round) {
      us[0].push_back(batch_us([&] {
        check(api.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, params, nullptr), "cuLaunchKernel");
      }));
      us[1].push_back(batch_us([&] {
        check(api.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, nullptr, extra), "cuLaunchKernel");
      }));
      us[2].push_back(batch_us([&] { launch(*function, dev, config, a, b, c, d, n); }));
      us[3].push_back(batch_us(c_api_launch));
      us[4].push_back(batch_us(c_api_bare));
      us[5].push_back(batch_us(c_api_own));
    }
    for (int row = 0; row < kRows; ++row) {
      std::printf("%s_us %.3f\n", names[row], median(us[row]));
      if (row < 2) continue;
      std::vector<double> ratios;
      for (int round = 0; round < kRounds; ++round) ratios.push_back(us[row][round] / us[0][round]);
      std::printf("ratio_%s %.4f\n", names[row], median(ratios));
    }
    // Where the typed launch's extra time goes: each step alone, in a tight loop (no launch).
    auto step = [&](auto&& one) {
      const int iterations = 200000;
      auto t0 = Clock::now();
      for (int i = 0; i < iterations; ++i) one();
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iterations;
    };
    // The typed launch's fast path: each argument to its acceptor (launch_detail::accept_fast) into a stack space.
    const std::vector<FastParam>& fast = function->fast();
    alignas(16) unsigned char space_fast[kFastSpaceBytes];
    std::printf("step_pack_fast_us %.4f\n", step([&] {
      int used = -1;
      std::memset(space_fast, 0, 36);
      const bool ok = launch_detail::accept_fast(fast[0], a, 0, used, space_fast) &&
                      launch_detail::accept_fast(fast[1], b, 0, used, space_fast) &&
                      launch_detail::accept_fast(fast[2], c, 0, used, space_fast) &&
                      launch_detail::accept_fast(fast[3], d, 0, used, space_fast) &&
                      launch_detail::accept_fast(fast[4], n, 0, used, space_fast);
      if (!ok) throw std::runtime_error("the fast path declined the bench's arguments");
    }));
    // The full path (what a declined launch runs, and the typed launch's packing before the fast path).
    launch_detail::Slot slots[5];
    ArgBuffer packed;
    std::printf("step_pack_us %.4f\n", step([&] {
      launch_detail::fill(slots[0], a, 0);
      launch_detail::fill(slots[1], b, 0);
      launch_detail::fill(slots[2], c, 0);
      launch_detail::fill(slots[3], d, 0);
      launch_detail::fill(slots[4], n, 0);
      launch_detail::pack_all(*function, slots, 5, 0, packed);
    }));
    std::printf("step_validate_us %.4f\n", step([&] { validate_launch(*function, config, dev); }));
    std::printf("step_make_current_us %.4f\n", step([&] { dev.make_current(); }));
    CUcontext ctx = nullptr;
    std::printf("step_cuCtxGetCurrent_us %.4f\n", step([&] { api.cuCtxGetCurrent(&ctx); }));
    std::printf("step_device_get_us %.4f\n", step([&] { (void)Device::get(0); }));
    capi->kernel_release(ck);
    capi->kernel_release(own);
    for (auto& buffer : buf) api.cuMemFree(buffer);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_bench: %s\n", e.what());
    return 1;
  }
}
