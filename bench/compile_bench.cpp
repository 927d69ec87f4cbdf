// compile_bench.cpp — compile-path timings: cold compile vs NVRTC direct, heavy-header kernels with and without
// automatic precompiled headers, memory hits, fresh-process disk hits.
// Prints one "name value" line per measurement (microseconds); bench/bench_compile.py makes the table.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "jitbridge/cache.hpp"
#include "jitbridge/jit.hpp"
#include "jitbridge/nvrtc_api.hpp"
#include "pch.hpp"

extern char** environ;
using namespace jitbridge;
using Clock = std::chrono::steady_clock;

namespace {

std::string source(int variant) {
  return fmt::format(
      "extern \"C\" __global__ void k(const float* a, const float* b, float* c, float* d, int n) {{\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) {{ c[i] = a[i] + b[i] * {0}.0f; d[i] = a[i] * b[i] - {0}.0f; }}\n}}\n",
      variant);
}

// Heavy-header kernels: distinct kernel `variant` of `family` ("cub": cub::BlockReduce through
// cub/block/block_reduce.cuh, the cub header CCCL 13.3's wheels let NVRTC include; "bf16": cuda_bf16.h).
std::string heavy_source(const std::string& family, int variant) {
  if (family == "cub")
    return fmt::format(
        "#include <cub/block/block_reduce.cuh>\n"
        "extern \"C\" __global__ void k(const float* x, float* out) {{\n"
        "  using R = cub::BlockReduce<float, 128>;\n  __shared__ typename R::TempStorage t;\n"
        "  float v = R(t).Sum(x[blockIdx.x * 128 + threadIdx.x] * {0}.0f);\n"
        "  if (threadIdx.x == 0) out[blockIdx.x] = v;\n}}\n",
        variant);
  return fmt::format(
      "#include <cuda_bf16.h>\n"
      "extern \"C\" __global__ void k(__nv_bfloat16* y, const __nv_bfloat16* x, int n) {{\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = __float2bfloat16(__bfloat162float(x[i]) * {0}.0f + 1.0f);\n}}\n",
      variant);
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void nvrtc_ok(nvrtcResult r) {
  if (r != NVRTC_SUCCESS) {
    std::fprintf(stderr, "NVRTC: %s\n", nvrtc_api().nvrtcGetErrorString(r));
    std::exit(1);
  }
}

// What a user calling NVRTC by hand does: create, compile for the target, fetch the cubin. The
// calls go through jitbridge's table of the NVRTC it loaded (nothing here links libnvrtc);
// the table is filled before the clock starts.
double nvrtc_direct(const std::string& src, const std::string& arch) {
  const NvrtcApi& api = nvrtc_api();
  auto t0 = Clock::now();
  nvrtcProgram prog = nullptr;
  nvrtc_ok(api.nvrtcCreateProgram(&prog, src.c_str(), "kernel.cu", 0, nullptr, nullptr));
  std::vector<std::string> opts = {"-arch=" + arch};
  for (const std::string& d : toolkit_include_dirs()) opts.push_back("-I" + d);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  nvrtc_ok(api.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data()));
  std::size_t size = 0;
  nvrtc_ok(api.nvrtcGetCUBINSize(prog, &size));
  std::string cubin(size, '\0');
  nvrtc_ok(api.nvrtcGetCUBIN(prog, cubin.data()));
  api.nvrtcDestroyProgram(&prog);
  return us_since(t0);
}

int child_disk_hit(const char* dir, bool explicit_arch, const std::string& src) {
  Cache cache(CacheConfig{true, dir, 1ull << 30});
  CompileOptions o;
  if (explicit_arch) o.arch = "sm_90";
  auto t0 = Clock::now();
  auto p = compile(src, o, &cache);
  double us = us_since(t0);
  if (p->origin != Origin::disk_cache || p->kernels.empty() || !p->kernels[0].signature) return 2;
  std::printf("%.3f\n", us);
  return 0;
}

// Runs this program again with `args`; returns what it printed (the child's stdout).
std::string spawn_self(const char* self, std::vector<std::string> args) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(1);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> argv = {const_cast<char*>(self)};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, self, &fa, nullptr, argv.data(), environ) != 0) std::exit(1);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (out.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "child %s failed (status %d)\n", args[0].c_str(), status);
    std::exit(1);
  }
  return out;
}

double spawn_disk_hit(const char* self, const std::string& dir, bool explicit_arch, const char* which = "plain") {
  return std::atof(
      spawn_self(self, {explicit_arch ? "--disk-hit" : "--disk-hit-default-arch", dir, which}).c_str());
}

// In a fresh process: five distinct kernels of `family`, one after the other as a user would compile
// them, each timed; `mode` is "direct" (NVRTC called by hand), "pch" (jitbridge, automatic PCHs on)
// or "nopch" (jitbridge, off). Prints the five times (us) and the count of PCH uses on one line.
int child_heavy(const std::string& family, const std::string& mode) {
  const std::string arch = "sm_90";
  compile(source(-7), CompileOptions{{}, {}, {}, {}, arch}, nullptr);  // NVRTC loaded and warm, as in a session
  detail::pch_configure(-1, mode == "nopch" ? 0 : 1);
  Cache memory_only(CacheConfig{false, "", 1});
  CompileOptions o;
  o.arch = arch;
  for (int i = 1; i <= 5; ++i) {
    const std::string src = heavy_source(family, i);
    double us = 0;
    if (mode == "direct") {
      us = nvrtc_direct(src, arch);
    } else {
      auto t0 = Clock::now();
      auto p = compile(src, o, &memory_only);
      us = us_since(t0);
      if (p->origin != Origin::compiled || p->kernels.size() != 1 || !p->kernels[0].signature) return 2;
    }
    std::printf("%.1f ", us);
  }
  std::printf("%llu\n", static_cast<unsigned long long>(detail::pch_stats().used));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--disk-hit")
    return child_disk_hit(argv[2], true, std::string(argv[3]) == "cub" ? heavy_source("cub", 0) : source(0));
  if (argc == 4 && std::string(argv[1]) == "--disk-hit-default-arch") return child_disk_hit(argv[2], false, source(0));
  if (argc == 4 && std::string(argv[1]) == "--heavy") return child_heavy(argv[2], argv[3]);
  const int cold_runs = argc > 1 ? std::atoi(argv[1]) : 15;
  const std::string arch = "sm_90";
  CompileOptions o;
  o.arch = arch;

  // Cold compiles, interleaved so drift hits both sides alike; each source is new to both.
  nvrtc_direct(source(-1), arch);  // load NVRTC's builtins once
  std::vector<double> direct, ours;
  for (int i = 0; i < cold_runs; ++i) {
    direct.push_back(nvrtc_direct(source(1000 + i), arch));
    Cache memory_only(CacheConfig{false, "", 1});
    auto t0 = Clock::now();
    compile(source(2000 + i), o, &memory_only);
    ours.push_back(us_since(t0));
  }
  std::printf("cold_nvrtc_direct_us %.1f\n", median(direct));
  std::printf("cold_jitbridge_us %.1f\n", median(ours));

  // The same compile again in one process: a memory hit.
  Cache memory_only(CacheConfig{false, "", 1});
  const std::string src = source(0);
  compile(src, o, &memory_only);
  std::vector<double> hits;
  for (int rep = 0; rep < 20; ++rep) {
    const int batch = 2000;
    auto t0 = Clock::now();
    for (int i = 0; i < batch; ++i) compile(src, o, &memory_only);
    hits.push_back(us_since(t0) / batch);
  }
  std::printf("memory_hit_us %.3f\n", median(hits));

  // A disk hit in a fresh process: from the call to having the kernels (with signatures) in hand.
  char dir_template[] = "/tmp/jitbridge-bench-XXXXXX";
  if (!mkdtemp(dir_template)) return 1;
  {
    Cache disk(CacheConfig{true, dir_template, 1ull << 30});
    compile(src, o, &disk);
    CompileOptions d;
    compile(src, d, &disk);  // the default-arch entry too
    compile(heavy_source("cub", 0), o, &disk);
  }
  std::vector<double> disk_hits, disk_hits_default;
  for (int i = 0; i < 15; ++i) disk_hits.push_back(spawn_disk_hit(argv[0], dir_template, true));
  for (int i = 0; i < 5; ++i) disk_hits_default.push_back(spawn_disk_hit(argv[0], dir_template, false));
  std::printf("disk_hit_fresh_process_us %.1f\n", median(disk_hits));
  std::printf("disk_hit_fresh_process_default_arch_us %.1f\n", median(disk_hits_default));
  std::vector<double> cub_hits;
  for (int i = 0; i < 7; ++i) cub_hits.push_back(spawn_disk_hit(argv[0], dir_template, true, "cub"));
  std::printf("disk_hit_fresh_process_cub_us %.1f\n", median(cub_hits));

  // Heavy headers: per family and mode, fresh processes (rounds of them: the median per kernel).
  const char* rounds_env = std::getenv("JITBRIDGE_BENCH_HEAVY_ROUNDS");
  const int rounds = rounds_env ? std::atoi(rounds_env) : 3;
  for (const char* family : {"bf16", "cub"})
    for (const char* mode : {"direct", "nopch", "pch"}) {
      std::vector<std::vector<double>> per_kernel(5);
      std::vector<double> used;
      for (int r = 0; r < rounds; ++r) {
        std::string line = spawn_self(argv[0], {"--heavy", family, mode});
        char* at = line.data();
        for (int i = 0; i < 5; ++i) per_kernel[static_cast<std::size_t>(i)].push_back(std::strtod(at, &at));
        used.push_back(std::strtod(at, &at));
      }
      for (int i = 0; i < 5; ++i)
        std::printf("heavy_%s_%s_%d %.1f\n", family, mode, i + 1, median(per_kernel[static_cast<std::size_t>(i)]));
      std::printf("heavy_%s_%s_pch_uses %.1f\n", family, mode, median(used));
    }
  Cache(CacheConfig{true, dir_template, 1ull << 30}).clear();
  std::string rm = std::string("rm -rf ") + dir_template;
  return std::system(rm.c_str()) == 0 ? 0 : 1;
}
