// compile_bench.cpp — compile-path timings: cold compile vs NVRTC direct, memory hits, fresh-process disk hits.
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

int child_disk_hit(const char* dir, bool explicit_arch) {
  Cache cache(CacheConfig{true, dir, 1ull << 30});
  CompileOptions o;
  if (explicit_arch) o.arch = "sm_90";
  auto t0 = Clock::now();
  auto p = compile(source(0), o, &cache);
  double us = us_since(t0);
  if (p->origin != Origin::disk_cache || p->kernels.empty() || !p->kernels[0].signature) return 2;
  std::printf("%.3f\n", us);
  return 0;
}

double spawn_disk_hit(const char* self, const std::string& dir, bool explicit_arch) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(1);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::string mode = explicit_arch ? "--disk-hit" : "--disk-hit-default-arch";
  std::vector<char*> argv = {const_cast<char*>(self), mode.data(), const_cast<char*>(dir.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, self, &fa, nullptr, argv.data(), environ) != 0) std::exit(1);
  close(fds[1]);
  char buf[64] = {};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "disk-hit child failed (status %d)\n", status);
    std::exit(1);
  }
  return std::atof(buf);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--disk-hit") return child_disk_hit(argv[2], true);
  if (argc == 3 && std::string(argv[1]) == "--disk-hit-default-arch") return child_disk_hit(argv[2], false);
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
  }
  std::vector<double> disk_hits, disk_hits_default;
  for (int i = 0; i < 15; ++i) disk_hits.push_back(spawn_disk_hit(argv[0], dir_template, true));
  for (int i = 0; i < 5; ++i) disk_hits_default.push_back(spawn_disk_hit(argv[0], dir_template, false));
  std::printf("disk_hit_fresh_process_us %.1f\n", median(disk_hits));
  std::printf("disk_hit_fresh_process_default_arch_us %.1f\n", median(disk_hits_default));
  Cache(CacheConfig{true, dir_template, 1ull << 30}).clear();
  std::string rm = std::string("rm -rf ") + dir_template;
  return std::system(rm.c_str()) == 0 ? 0 : 1;
}
