// test_pch.cpp — automatic precompiled headers (jit/src/pch.cpp): prefix, use, invalidation, -pch, JITBRIDGE_PCH.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <iterator>
#include <thread>

#include "cache_lock.hpp"
#include "fd_count.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/jit.hpp"
#include "pch.hpp"
#include "temp_dir.hpp"

using namespace jitbridge;
using detail::pch_stats;
using jitbridge::testing::NoFdLeak;
using jitbridge::testing::TempDir;

namespace {

CompileOptions opts() {
  CompileOptions o;
  o.arch = "sm_90";
  return o;
}

const std::string kFp16 = "#include <cuda_fp16.h>\n";

std::string fp16_kernel(const std::string& prefix, int n) {
  return prefix + "extern \"C\" __global__ void k" + std::to_string(n) +
         "(__half* x, int n) { if (threadIdx.x < n) x[threadIdx.x] = __float2half(" + std::to_string(n) + ".0f); }\n";
}

void spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// Every compile of the test qualifies for a PCH (no minimum time); restored at scope end.
struct PchOn {
  explicit PchOn(int enabled = 1) {
    detail::pch_reset();
    detail::pch_configure(0, enabled);
  }
  ~PchOn() {
    detail::pch_reset();
    detail::pch_configure(-1, -1);
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A PID no process has now: a child's, once it ended and was waited for.
pid_t dead_pid() {
  pid_t dead = 0;
  char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
  REQUIRE(::posix_spawn(&dead, "/bin/true", nullptr, nullptr, argv, nullptr) == 0);
  int status = 0;
  REQUIRE(::waitpid(dead, &status, 0) == dead);
  return dead;
}

// Sets `path`'s modification time `seconds` into the past.
void untouched_for(const std::string& path, int seconds) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ::time(nullptr) - seconds;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

int pch_files_in(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      n += name.size() > 4 && name.substr(name.size() - 4) == ".pch";
    }
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("pch: the prefix is the leading directives, cut after the last #include") {
  using detail::pch_prefix;
  CHECK(pch_prefix("__global__ void k() {}") == "");
  CHECK(pch_prefix("#define N 4\n__global__ void k() {}") == "");
  CHECK(pch_prefix("#include <a.h>\n__global__ void k() {}") == "#include <a.h>\n");
  CHECK(pch_prefix("// c\n/* d\n */ #include <a.h>\n#pragma once\n#define X \\\n 1\n#include \"b.h\"\n#define N 4\nint x;") ==
        "// c\n/* d\n */ #include <a.h>\n#pragma once\n#define X \\\n 1\n#include \"b.h\"\n");
  CHECK(pch_prefix("#include <a.h>\n#if A\n#include <b.h>\n#endif\n") == "#include <a.h>\n");  // stops at #if
  CHECK(pch_prefix("#include <a.h>\ntypedef int T;\n#include <b.h>\n") == "#include <a.h>\n");
  CHECK(pch_prefix("#include <a.h>") == "#include <a.h>");
  CHECK(pch_prefix("/* open\n#include <a.h>\n") == "");
  CHECK(pch_prefix("  #  include <a.h>\n int x;") == "  #  include <a.h>\n");
  CHECK(detail::pch_cacheable({"-pch", "-arch=sm_90"}));
  CHECK_FALSE(detail::pch_cacheable({"-use-pch=/tmp/x.pch"}));
  CHECK_FALSE(detail::pch_cacheable({"--create-pch=x.pch"}));
}

TEST_CASE("pch: a second kernel after the same headers uses the PCH; binary, log and signature are unchanged") {
  NoFdLeak fds;
  PchOn on;
  Cache cache(CacheConfig{false, "", 1});
  const auto before = pch_stats();
  auto first = compile(fp16_kernel(kFp16, 1), opts(), &cache);  // plain: the prefix is marked
  CHECK(pch_stats().created == before.created);
  auto second = compile(fp16_kernel(kFp16, 2), opts(), &cache);  // makes the PCH and uses it
  CHECK(pch_stats().created == before.created + 1);
  CHECK(pch_stats().ready == 1);
  CHECK(pch_stats().used == before.used + 1);
  CHECK(second->origin == Origin::compiled);
  REQUIRE(second->kernels.size() == 1);
  CHECK(second->kernels[0].signature->to_string() == "(__half*, int)");
  CHECK(second->options == first->options);  // no PCH option shows
  // The same program compiled with PCHs off.
  detail::pch_configure(0, 0);
  Cache other(CacheConfig{false, "", 1});
  auto plain = compile(fp16_kernel(kFp16, 2), opts(), &other);
  CHECK(pch_stats().used == before.used + 1);
  CHECK(plain->cubin == second->cubin);
  CHECK(plain->log == second->log);
  CHECK(plain->kernels[0].resources.registers == second->kernels[0].resources.registers);
}

TEST_CASE("pch: cub kernels share one PCH (cub/block/block_reduce.cuh)") {
  PchOn on;
  detail::pch_configure(-1, 1);  // the default minimum time: cub takes long enough by itself
  Cache cache(CacheConfig{false, "", 1});
  const std::string prefix = "#include <cub/block/block_reduce.cuh>\n";
  auto kernel = [&](int n) {
    return prefix + "__global__ void sum" + std::to_string(n) +
           "(const float* x, float* out) {\n"
           "  using R = cub::BlockReduce<float, 128>;\n  __shared__ typename R::TempStorage t;\n"
           "  float v = R(t).Sum(x[threadIdx.x] * " + std::to_string(n) + ".0f);\n"
           "  if (threadIdx.x == 0) *out = v;\n}\n";
  };
  const auto before = pch_stats();
  compile(kernel(1), opts(), &cache);
  CHECK(pch_stats().created == before.created);
  auto second = compile(kernel(2), opts(), &cache);
  CHECK(pch_stats().created == before.created + 1);
  CHECK(pch_stats().used == before.used + 1);
  CHECK(compile(kernel(3), opts(), &cache)->log.empty());
  CHECK(pch_stats().used == before.used + 2);
  REQUIRE(second->kernels.size() == 1);
  CHECK(second->kernels[0].name == "sum2");
  CHECK(second->kernels[0].signature->to_string() == "(float const*, float*)");
  CHECK(second->log.empty());
}

TEST_CASE("pch: a header edit in the prefix or after it, and a -D change, give fresh compiles") {
  NoFdLeak fds;
  PchOn on;
  const TempDir inc_temp("pch-test");
  const std::string& inc = inc_temp.path;
  spit(inc + "/u.h", "#define U 1.0f\n");
  spit(inc + "/w.h", "#define W 1.0f\n");
  CompileOptions o = opts();
  o.include_paths = {inc};
  const std::string prefix = kFp16 + "#include \"u.h\"\n";
  auto kernel = [&](int n) {
    return prefix + "typedef float T;\n#include \"w.h\"\nextern \"C\" __global__ void k" + std::to_string(n) +
           "(T* x) { x[0] = U + W + " + std::to_string(n) + ".0f; }\n";
  };
  Cache cache(CacheConfig{false, "", 1});
  compile(kernel(1), o, &cache);
  auto before = pch_stats();
  auto a = compile(kernel(2), o, &cache);
  CHECK(pch_stats().used == before.used + 1);
  CHECK(compile(kernel(2), o, &cache)->origin == Origin::memory_cache);  // cached, with both headers
  // w.h comes after the prefix: NVRTC's trace lists it even with the PCH in use.
  spit(inc + "/w.h", "#define W 2.0f\n");
  auto b = compile(kernel(2), o, &cache);
  CHECK(b->origin == Origin::compiled);
  CHECK(b->cubin != a->cubin);
  CHECK(pch_stats().used == before.used + 2);
  // u.h is inside the PCH: the entry and the PCH both see the edit.
  spit(inc + "/u.h", "#define U 2.0f\n");
  auto c = compile(kernel(2), o, &cache);
  CHECK(c->origin == Origin::compiled);
  CHECK(c->cubin != b->cubin);
  CHECK(pch_stats().dropped >= before.dropped + 1);
  CHECK(pch_stats().used == before.used + 2);  // compiled plain; the next compile makes a new PCH
  CHECK(compile(kernel(3), o, &cache)->origin == Origin::compiled);
  CHECK(pch_stats().used == before.used + 3);
  // Other options: another PCH, never a mismatched one (NVRTC would warn in the log).
  o.options = {"-DX=1"};
  auto d = compile(kernel(4), o, &cache);
  CHECK(d->log.empty());
  CHECK(pch_stats().used == before.used + 3);
}

TEST_CASE("pch: JITBRIDGE_PCH=0 turns automatic PCHs off") {
  ::setenv("JITBRIDGE_PCH", "0", 1);
  PchOn on(-1);  // as the environment says
  Cache cache(CacheConfig{false, "", 1});
  const auto before = pch_stats();
  compile(fp16_kernel(kFp16, 11), opts(), &cache);
  compile(fp16_kernel(kFp16, 12), opts(), &cache);
  compile(fp16_kernel(kFp16, 13), opts(), &cache);
  CHECK(pch_stats().created == before.created);
  CHECK(pch_stats().used == before.used);
  ::unsetenv("JITBRIDGE_PCH");
}

TEST_CASE("pch: a user's -pch is cached and managed: no files in the working directory, the same log") {
  NoFdLeak fds;
  PchOn on(0);  // automatic PCHs off: -pch asks for them all the same
  Cache cache(CacheConfig{false, "", 1});
  CompileOptions o = opts();
  o.options = {"-pch", "-pch-dir=/nonexistent-jitbridge-dir"};
  const int files_before = pch_files_in(".");
  const auto before = pch_stats();
  auto a = compile(fp16_kernel(kFp16, 21), o, &cache);  // -pch: the first compile makes it, as NVRTC's would
  CHECK(a->origin == Origin::compiled);
  CHECK(a->log.find("precompiled header") == std::string::npos);
  CHECK(pch_stats().created == before.created + 1);
  CHECK(pch_stats().used == before.used + 1);
  CHECK(compile(fp16_kernel(kFp16, 21), o, &cache)->origin == Origin::memory_cache);
  auto b = compile(fp16_kernel(kFp16, 22), o, &cache);
  CHECK(pch_stats().used == before.used + 2);
  CHECK(b->log.find("precompiled header") == std::string::npos);
  CHECK(compile(fp16_kernel(kFp16, 22), o, &cache)->origin == Origin::memory_cache);
  CHECK(pch_files_in(".") == files_before);
}

TEST_CASE("pch: compiles from several threads while PCHs are made and used") {
  PchOn on;
  Cache cache(CacheConfig{false, "", 1});
  compile(fp16_kernel(kFp16, 30), opts(), &cache);
  std::vector<std::thread> threads;
  std::vector<std::string> got(6);
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      const std::string prefix = t % 2 ? kFp16 : "#include <cuda_bf16.h>\n";
      auto p = compile(fp16_kernel(prefix, 31 + t), opts(), &cache);
      got[static_cast<std::size_t>(t)] = p->kernels.at(0).signature->to_string();
    });
  for (auto& th : threads) th.join();
  for (const std::string& s : got) CHECK(s == "(__half*, int)");
}

TEST_CASE("pch: a prefix that does not compile alone fails once, quietly, and leaves no trace file behind") {
  NoFdLeak fds;
  PchOn on;
  const TempDir inc_temp("pch-test");
  const std::string& inc = inc_temp.path;
  spit(inc + "/open.h", "struct S {\n");  // closed by the source after the prefix
  CompileOptions o = opts();
  o.include_paths = {inc};
  auto kernel = [&](int n) {
    return kFp16 + "#include \"open.h\"\nint a; };\nextern \"C\" __global__ void k" + std::to_string(n) +
           "(float* x) { x[0] = " + std::to_string(n) + ".0f; }\n";
  };
  Cache cache(CacheConfig{false, "", 1});
  const auto before = pch_stats();
  compile(kernel(1), o, &cache);
  auto second = compile(kernel(2), o, &cache);  // making the PCH fails: compiled plain
  REQUIRE(second->kernels.size() == 1);
  CHECK(second->kernels[0].name == "k2");
  CHECK(second->log.empty());
  CHECK(pch_stats().failed == before.failed + 1);
  CHECK(pch_stats().used == before.used);
  compile(kernel(3), o, &cache);  // not tried again
  CHECK(pch_stats().failed == before.failed + 1);
  compile("extern \"C\" __global__ void untraced(float* x) { x[0] = 5; }\n", opts(), &cache);
  struct stat st;
  CHECK(::stat("./.json", &st) != 0);
}

TEST_CASE("pch: directories without a lock: removed when no process has their PID and untouched for a minute") {
  const TempDir tmp_temp("pch-test");
  const std::string& tmp = tmp_temp.path;
  const pid_t dead = dead_pid();
  const std::string gone = tmp + "/jitbridge-pch-" + std::to_string(dead) + "-abcdef";
  const std::string fresh = tmp + "/jitbridge-pch-" + std::to_string(dead) + "-ghijkl";  // its owner about to lock
  const std::string live = tmp + "/jitbridge-pch-" + std::to_string(::getpid()) + "-abcdef";
  const std::string other = tmp + "/jitbridge-pch-x-abcdef";
  for (const std::string& d : {gone, fresh, live, other}) {
    REQUIRE(::mkdir(d.c_str(), 0700) == 0);
    spit(d + "/p0.pch", "pch");
  }
  spit(fresh + "/owner.lock", "");  // made, not yet taken (its owner writes its state once it holds it)
  for (const std::string& d : {gone, live, other}) untouched_for(d, 120);
  detail::pch_remove_orphans(tmp);
  struct stat st;
  CHECK(::stat(gone.c_str(), &st) != 0);
  CHECK(::stat((fresh + "/p0.pch").c_str(), &st) == 0);
  CHECK(slurp(fresh + "/owner.lock").empty());  // its lock not taken by the sweep
  CHECK(::stat((live + "/p0.pch").c_str(), &st) == 0);
  CHECK(::stat((other + "/p0.pch").c_str(), &st) == 0);
  for (const std::string& d : {fresh, live, other}) {
    ::unlink((d + "/p0.pch").c_str());
    ::unlink((d + "/owner.lock").c_str());
    ::rmdir(d.c_str());
  }
  // A symlink in a gone process's name (someone else's doing) is not followed: what it points at keeps its files.
  const std::string victim = tmp + "/victim";
  REQUIRE(::mkdir(victim.c_str(), 0700) == 0);
  spit(victim + "/keep.txt", "mine");
  REQUIRE(::symlink(victim.c_str(), gone.c_str()) == 0);
  detail::pch_remove_orphans(tmp);
  CHECK(::stat((victim + "/keep.txt").c_str(), &st) == 0);
}

TEST_CASE("pch: a directory's lock, not its PID, tells an orphan (a PID reused, or of another PID namespace)") {
  const TempDir tmp_temp("pch-test");
  const std::string& tmp = tmp_temp.path;
  const std::string held = tmp + "/jitbridge-pch-" + std::to_string(dead_pid()) + "-abcdef";  // live elsewhere
  const std::string reused = tmp + "/jitbridge-pch-" + std::to_string(::getpid()) + "-abcdef";  // owner died
  for (const std::string& d : {held, reused}) {
    REQUIRE(::mkdir(d.c_str(), 0700) == 0);
    spit(d + "/p0.pch", "pch");
    spit(d + "/owner.lock", "compiling pid 1 host elsewhere\n");  // an owner took it once
    untouched_for(d, 120);
  }
  detail::CacheLock owner;  // the live owner of `held`, whose PID this namespace does not see
  REQUIRE(owner.try_lock(held + "/owner.lock") == detail::CacheLock::Try::held);
  detail::pch_remove_orphans(tmp);
  struct stat st;
  CHECK(::stat((held + "/p0.pch").c_str(), &st) == 0);
  CHECK(::stat(reused.c_str(), &st) != 0);
  owner.release(false);  // its owner ends
  detail::pch_remove_orphans(tmp);
  CHECK(::stat(held.c_str(), &st) != 0);
}

TEST_CASE("pch: this process holds its directory's lock for its life; a sweep keeps the directory") {
  const std::string dir = detail::pch_directory();
  REQUIRE(!dir.empty());
  CHECK(slurp(dir + "/owner.lock").rfind("compiling pid " + std::to_string(::getpid()) + " ", 0) == 0);
  detail::CacheLock other;  // another open of the file, as another process's sweep makes
  CHECK(other.try_lock(dir + "/owner.lock") == detail::CacheLock::Try::busy);
  other.release(false);
  detail::pch_remove_orphans(dir.substr(0, dir.rfind('/')));
  struct stat st;
  CHECK(::stat((dir + "/owner.lock").c_str(), &st) == 0);
  CHECK(detail::pch_directory() == dir);
}
