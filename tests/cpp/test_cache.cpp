// test_cache.cpp — the kernel cache: hits, misses, header edits, damaged entries, eviction, races.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <fstream>
#include <sstream>
#include <thread>

#include "cache_internal.hpp"
#include "cache_test_support.hpp"
#include "temp_dir.hpp"
#include "pch.hpp"
#include "fd_count.hpp"
#include "jit_internal.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/jit.hpp"

extern char** environ;
using namespace jitbridge;
using jitbridge::testing::NoFdLeak;
using jitbridge::testing::CapturedWarnings;
using jitbridge::testing::TempDir;

namespace {

std::vector<std::string> entry_files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir((dir + "/v1").c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 4 && n.substr(n.size() - 4) == ".jbc") out.push_back(dir + "/v1/" + n);
    }
    ::closedir(d);
  }
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

CacheConfig disk_config(const std::string& dir, std::uint64_t max_bytes = 1 << 30) {
  return CacheConfig{true, dir, max_bytes};
}

CompileOptions opts() {
  CompileOptions o;
  o.arch = "sm_90";
  return o;
}

std::string kernel_source(int variant) {
  return "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] += " + std::to_string(variant) + ".0f; }\n";
}

}  // namespace

TEST_CASE("cache: miss, memory hit, then disk hit in a fresh cache") {
  NoFdLeak fds;
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  {
    Cache cache(disk_config(dir));
    auto first = compile(kernel_source(1), opts(), &cache);
    CHECK(first->origin == Origin::compiled);
    auto second = compile(kernel_source(1), opts(), &cache);
    CHECK(second->origin == Origin::memory_cache);
    CHECK(second->cubin == first->cubin);
    CHECK(cache.info().entries == 1);
  }
  Cache fresh(disk_config(dir));  // what a new process sees
  auto third = compile(kernel_source(1), opts(), &fresh);
  CHECK(third->origin == Origin::disk_cache);
  REQUIRE(third->kernels.size() == 1);
  CHECK(third->kernels[0].signature->to_string() == "(float*)");
  CHECK(third->kernels[0].resources.registers > 0);
  CHECK(compile(kernel_source(1), opts(), &fresh)->origin == Origin::memory_cache);
}

TEST_CASE("cache: everything that changes the binary changes the key") {
  NoFdLeak fds;
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  Cache cache(disk_config(dir));
  compile(kernel_source(1), opts(), &cache);
  CHECK(compile(kernel_source(2), opts(), &cache)->origin == Origin::compiled);
  CompileOptions o = opts();
  o.options = {"-DX=1"};
  CHECK(compile(kernel_source(1), o, &cache)->origin == Origin::compiled);
  o = opts();
  o.arch = "sm_80";
  CHECK(compile(kernel_source(1), o, &cache)->origin == Origin::compiled);
  o = opts();
  o.headers = {{"unused.h", "// a"}};
  CHECK(compile(kernel_source(1), o, &cache)->origin == Origin::compiled);
  o.headers = {{"unused.h", "// b"}};
  CHECK(compile(kernel_source(1), o, &cache)->origin == Origin::compiled);
  o = opts();
  o.name_expressions = {"k"};
  CHECK(compile(kernel_source(1), o, &cache)->origin == Origin::compiled);
  CHECK(cache.info().entries == 7);
}

TEST_CASE("cache: editing an included header (nested, on disk) recompiles") {
  NoFdLeak fds;
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  const TempDir inc_temp("cache-test");
  const std::string& inc = inc_temp.path;
  ::mkdir((inc + "/sub").c_str(), 0700);
  spit(inc + "/outer.h", "#include \"sub/inner.h\"\n");
  spit(inc + "/sub/inner.h", "#define VALUE 1.0f\n");
  CompileOptions o = opts();
  o.include_paths = {inc};
  const std::string src = "#include \"outer.h\"\nextern \"C\" __global__ void k(float* x) { x[0] = VALUE; }\n";
  Cache cache(disk_config(dir));
  auto a = compile(src, o, &cache);
  CHECK(a->origin == Origin::compiled);
  CHECK(compile(src, o, &cache)->origin == Origin::memory_cache);
  // Same size, written immediately: only a content check can tell.
  spit(inc + "/sub/inner.h", "#define VALUE 2.0f\n");
  auto b = compile(src, o, &cache);
  CHECK(b->origin == Origin::compiled);
  CHECK(b->cubin != a->cubin);
  Cache fresh(disk_config(dir));
  CHECK(compile(src, o, &fresh)->origin == Origin::disk_cache);
  spit(inc + "/sub/inner.h", "#define VALUE 3.0f\n");
  Cache fresh2(disk_config(dir));
  CHECK(compile(src, o, &fresh2)->origin == Origin::compiled);
  // A deleted header is a miss that surfaces the compiler's own error.
  ::unlink((inc + "/sub/inner.h").c_str());
  Cache fresh3(disk_config(dir));
  CHECK_THROWS_AS(compile(src, o, &fresh3), CompileError);
}

TEST_CASE("cache: record_dependencies leaves out toolkit and in-memory headers") {
  std::string cwd;
  std::vector<std::string> dirs = toolkit_include_dirs();
  REQUIRE_FALSE(dirs.empty());
  auto deps = detail::record_dependencies({dirs[0] + "/cuda_fp16.h", "mem.h", "__nv_nvrtc_builtin_header.h"},
                                          {{"mem.h", "x"}}, {}, cwd);
  CHECK(deps.empty());
  CHECK(cwd.empty());
}

TEST_CASE("cache: a header added earlier on the include path (shadowing the one read) recompiles") {
  NoFdLeak fds;
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  const TempDir first_temp("cache-test"), second_temp("cache-test");
  const std::string& first = first_temp.path;
  const std::string& second = second_temp.path;
  ::mkdir((second + "/sub").c_str(), 0700);
  spit(second + "/sub/v.h", "#define VALUE 1.0f\n");
  CompileOptions o = opts();
  o.include_paths = {first, second};
  const std::string src = "#include \"sub/v.h\"\nextern \"C\" __global__ void k(float* x) { x[0] = VALUE; }\n";
  Cache cache(disk_config(dir));
  auto a = compile(src, o, &cache);
  CHECK(a->origin == Origin::compiled);
  CHECK(compile(src, o, &cache)->origin == Origin::memory_cache);  // nothing changed: still a hit
  {
    Cache fresh(disk_config(dir));
    CHECK(compile(src, o, &fresh)->origin == Origin::disk_cache);
  }
  ::mkdir((first + "/sub").c_str(), 0700);
  spit(first + "/sub/v.h", "#define VALUE 2.0f\n");  // found before second/sub/v.h from now on
  auto b = compile(src, o, &cache);
  CHECK(b->origin == Origin::compiled);
  CHECK(b->cubin != a->cubin);
  Cache fresh(disk_config(dir));
  auto c = compile(src, o, &fresh);
  CHECK(c->origin == Origin::disk_cache);
  CHECK(c->cubin == b->cubin);
  // A toolkit header shadowed by a file in a user include dir.
  const std::string fp16 = "#include <cuda_fp16.h>\nextern \"C\" __global__ void k(__half* x) { x[0] = x[1]; }\n";
  CompileOptions o2 = opts();
  o2.include_paths = {second};
  CHECK(compile(fp16, o2, &cache)->origin == Origin::compiled);
  CHECK(compile(fp16, o2, &cache)->origin == Origin::memory_cache);
  spit(second + "/cuda_fp16.h", "struct __half { unsigned short x; };\n");
  auto shadowed = compile(fp16, o2, &cache);
  CHECK(shadowed->origin == Origin::compiled);
  REQUIRE(shadowed->kernels.size() == 1);
  CHECK(shadowed->kernels[0].signature->to_string() == "(__half*)");
}

TEST_CASE("cache: absences are recorded through the first missing ancestor, toolkit dirs left out") {
  std::string cwd;
  const std::vector<std::string>& tk = toolkit_include_dirs();
  REQUIRE_FALSE(tk.empty());
  const TempDir user_temp("cache-test");
  const std::string& user = user_temp.path;
  ::mkdir((user + "/cuda").c_str(), 0700);
  std::vector<std::string> dirs = {user + "/none", user};
  for (const std::string& d : tk) dirs.push_back(d);
  const std::vector<std::string> read = {tk[0] + "/cub/block/a.cuh", tk[0] + "/cub/b.cuh", tk[0] + "/cuda/std/c",
                                         tk[0] + "/cuda/std/d"};
  auto deps = detail::record_dependencies(read, {}, dirs, cwd);
  std::vector<std::string> absent;
  for (const auto& d : deps) {
    CHECK(d.absent());
    absent.push_back(d.path);
  }
  // One record for the missing dir, one for <user>/cub, and per file under the existing <user>/cuda.
  std::sort(absent.begin(), absent.end());
  CHECK(absent == std::vector<std::string>{user + "/cub", user + "/cuda/std", user + "/none"});
  detail::CacheRecord record;
  record.deps = deps;
  CHECK(detail::dependencies_unchanged(record));
  ::mkdir((user + "/cub").c_str(), 0700);
  CHECK_FALSE(detail::dependencies_unchanged(record));
  // The format keeps an absence (empty hash) apart from a dependency.
  record.program = std::make_shared<Program>();
  ::rmdir((user + "/cub").c_str());
  auto back = detail::parse_record(detail::serialize_record("k", record), "k");
  REQUIRE(back);
  REQUIRE(back->deps.size() == 3);
  CHECK(back->deps[0].absent());
  CHECK(detail::dependencies_unchanged(*back));
}

TEST_CASE("cache: damaged or foreign entries are misses that get replaced") {
  NoFdLeak fds;
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  { Cache c(disk_config(dir)); compile(kernel_source(7), opts(), &c); }
  auto files = entry_files(dir);
  REQUIRE(files.size() == 1);
  const std::string path = files[0];
  const std::string good = slurp(path);

  SECTION("flipped byte") {
    std::string bad = good;
    bad[bad.size() / 2] ^= 0x5a;
    spit(path, bad);
  }
  SECTION("truncated") { spit(path, good.substr(0, good.size() / 2)); }
  SECTION("empty") { spit(path, ""); }
  SECTION("garbage") { spit(path, std::string(4096, 'x')); }
  SECTION("another key's valid entry under this name") {
    detail::CacheRecord r;
    r.program = std::make_shared<Program>();
    spit(path, detail::serialize_record("some-other-key", r));
  }
  SECTION("huge length field") {
    std::string bad = good;
    bad[8] = '\xff'; bad[9] = '\xff'; bad[14] = '\x7f';
    spit(path, bad);
  }
  Cache c(disk_config(dir));
  auto p = compile(kernel_source(7), opts(), &c);
  CHECK(p->origin == Origin::compiled);
  CHECK(slurp(path).size() == good.size());  // rewritten whole (only the record time differs)
  Cache again(disk_config(dir));
  CHECK(compile(kernel_source(7), opts(), &again)->origin == Origin::disk_cache);
}

TEST_CASE("cache: parse_record refuses every truncation of a valid entry") {
  NoFdLeak fds;
  detail::CacheRecord r;
  auto p = std::make_shared<Program>();
  p->cubin = "binary";
  p->kernels.push_back(Kernel{"k", "k", Signature{{Param{Param::Kind::pointer, "float", true, 8, 8, "float const*"}}}, {}});
  r.program = p;
  r.deps.push_back({"/x/y.h", 3, 4, "abc"});
  std::string bytes = detail::serialize_record("key", r);
  auto back = detail::parse_record(bytes, "key");
  REQUIRE(back);
  CHECK(back->program->kernels.at(0).signature->params.at(0).spelling == "float const*");
  CHECK(back->deps.at(0).path == "/x/y.h");
  for (std::size_t n = 0; n < bytes.size(); ++n) CHECK_FALSE(detail::parse_record(bytes.substr(0, n), "key"));
  CHECK_FALSE(detail::parse_record(bytes, "other"));
}

TEST_CASE("cache: the directory stays under its size bound, least recently used first") {
  NoFdLeak fds;
  // Entry ages are set explicitly (no sleeping, no reliance on the file system's mtime resolution).
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  std::map<int, std::string> file_of;  // variant -> its entry file
  auto compile_new = [&](int variant, Cache& cache) {
    std::vector<std::string> before = entry_files(dir);
    CHECK(compile(kernel_source(variant), opts(), &cache)->origin == Origin::compiled);
    for (const std::string& f : entry_files(dir))
      if (std::find(before.begin(), before.end(), f) == before.end()) file_of[variant] = f;
    REQUIRE(file_of.count(variant));
  };
  auto age = [&](int variant, int seconds_ago) {
    struct timespec times[2];
    times[0].tv_sec = times[1].tv_sec = ::time(nullptr) - seconds_ago;
    times[0].tv_nsec = times[1].tv_nsec = 0;
    REQUIRE(::utimensat(AT_FDCWD, file_of.at(variant).c_str(), times, 0) == 0);
  };
  std::uint64_t one = 0;
  { Cache c(disk_config(dir)); compile_new(100, c); one = c.info().bytes; }
  REQUIRE(one > 0);
  Cache cache(disk_config(dir, one * 3 + one / 2));  // room for three entries
  compile_new(101, cache);
  compile_new(102, cache);
  age(100, 300);
  age(101, 200);
  age(102, 100);
  // A hit on 100 through a fresh cache makes it the most recently used.
  { Cache reader(disk_config(dir)); CHECK(compile(kernel_source(100), opts(), &reader)->origin == Origin::disk_cache); }
  compile_new(103, cache);  // over the bound: 101, the least recently used, goes
  compile_new(104, cache);  // and then 102
  CacheInfo info = cache.info();
  CHECK(info.entries == 3);
  CHECK(info.bytes <= one * 3 + one / 2);
  struct stat st;
  CHECK(::stat(file_of.at(100).c_str(), &st) == 0);  // kept: recently used
  CHECK(::stat(file_of.at(104).c_str(), &st) == 0);  // kept: newest
  CHECK(::stat(file_of.at(101).c_str(), &st) != 0);  // evicted: least recently used
  CHECK(::stat(file_of.at(102).c_str(), &st) != 0);
}

TEST_CASE("cache: an unusable directory falls back to memory with one warning") {
  NoFdLeak fds;
  const TempDir base_temp("cache-test");
  const std::string& base = base_temp.path;
  spit(base + "/not-a-dir", "file");
  CapturedWarnings warnings;
  Cache cache(disk_config(base + "/not-a-dir/cache"));
  CHECK(compile(kernel_source(200), opts(), &cache)->origin == Origin::compiled);
  CHECK(compile(kernel_source(201), opts(), &cache)->origin == Origin::compiled);
  CHECK(compile(kernel_source(200), opts(), &cache)->origin == Origin::memory_cache);
  REQUIRE(warnings.messages.size() == 1);
  CHECK(warnings.messages[0].find("memory only") != std::string::npos);
  CHECK_FALSE(cache.info().disk);
}

TEST_CASE("cache: clear removes memory and disk entries") {
  NoFdLeak fds;
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  Cache cache(disk_config(dir));
  compile(kernel_source(300), opts(), &cache);
  compile(kernel_source(301), opts(), &cache);
  CHECK(cache.clear() == 2);
  CHECK(cache.info().entries == 0);
  CHECK(compile(kernel_source(300), opts(), &cache)->origin == Origin::compiled);
}

TEST_CASE("cache: configuration from the environment") {
  ::setenv("JITBRIDGE_CACHE_DIR", "/some/where", 1);
  ::setenv("JITBRIDGE_CACHE", "0", 1);
  ::setenv("JITBRIDGE_CACHE_MAX_BYTES", "12345", 1);
  CacheConfig c = CacheConfig::from_environment();
  CHECK(c.directory == "/some/where");
  CHECK_FALSE(c.disk);
  CHECK(c.max_bytes == 12345);
  CHECK(c.lock_timeout_s == 300);  // the default
  ::setenv("JITBRIDGE_CACHE_LOCK_TIMEOUT", "2.5", 1);
  CHECK(CacheConfig::from_environment().lock_timeout_s == 2.5);
  ::setenv("JITBRIDGE_CACHE_LOCK_TIMEOUT", "0", 1);
  CHECK(CacheConfig::from_environment().lock_timeout_s == 0);
  ::unsetenv("JITBRIDGE_CACHE_LOCK_TIMEOUT");
  ::unsetenv("JITBRIDGE_CACHE_DIR");
  ::setenv("JITBRIDGE_CACHE", "1", 1);
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  c = CacheConfig::from_environment();
  CHECK(c.directory == "/xdg/jitbridge");
  CHECK(c.disk);
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("JITBRIDGE_CACHE_MAX_BYTES");
  ::setenv("JITBRIDGE_CACHE", "0", 1);
}

// Run by the race test below in child processes: compiles one kernel into $RACE_DIR.
TEST_CASE("cache race child", "[.race-child]") {
  const char* dir = std::getenv("RACE_DIR");
  REQUIRE(dir);
  Cache cache(disk_config(dir));
  auto p = compile(kernel_source(400), opts(), &cache);
  REQUIRE(p->kernels.size() == 1);
  REQUIRE(p->kernels[0].signature->to_string() == "(float*)");
}

TEST_CASE("cache: processes racing on one key never see a torn entry") {
  NoFdLeak fds;
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  std::string env_dir = "RACE_DIR=" + dir;
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  env.push_back(env_dir.data());
  env.push_back(nullptr);
  const char* binary = JITBRIDGE_TESTS_BINARY;
  std::vector<pid_t> children;
  for (int round = 0; round < 2; ++round) {  // first all miss and write, then all read
    for (int i = 0; i < 6; ++i) {
      char arg0[] = "jitbridge_tests";
      char arg1[] = "cache race child";
      char* argv[] = {arg0, arg1, nullptr};
      pid_t pid = 0;
      REQUIRE(::posix_spawn(&pid, binary, nullptr, nullptr, argv, env.data()) == 0);
      children.push_back(pid);
    }
    for (pid_t pid : children) {
      int status = 0;
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
    children.clear();
  }
  auto files = entry_files(dir);
  REQUIRE(files.size() == 1);
  Cache reader(disk_config(dir));
  CHECK(compile(kernel_source(400), opts(), &reader)->origin == Origin::disk_cache);
}

TEST_CASE("cache: reads_only_toolkit_headers accepts only #include <name> lines and toolkit dirs") {
  CompileOptions o = opts();
  std::string arch;
  const std::vector<std::string> plain = detail::effective_options(o, arch);
  auto only = [&](const std::string& src, const std::vector<Header>& mem = {}) {
    return detail::reads_only_toolkit_headers(src, mem, plain);
  };
  CHECK(only("__global__ void k() {}\n"));
  CHECK(only("#include <cuda_fp16.h>\n  #  include\t<cub/block/block_reduce.cuh>\r\n__global__ void k() {}\n"));
  CHECK_FALSE(only("#include \"cuda_fp16.h\"\n"));           // quoted: the working directory first
  CHECK_FALSE(only("#define H <cuda_fp16.h>\n#include H\n"));  // computed
  CHECK_FALSE(only("#include_next <cuda_fp16.h>\n"));
  CHECK_FALSE(only("#if __has_include(<x.h>)\n#endif\n"));
  CHECK_FALSE(only("// include the right thing\n"));
  CHECK_FALSE(only("#include </tmp/x.h>\n"));
  CHECK_FALSE(only("#include <../x.h>\n"));
  CHECK_FALSE(only("#include <x.h\n"));
  CHECK_FALSE(only("int a; #include <x.h>\n"));
  CHECK(only("#include <mem.h>\n", {{"mem.h", "#include <cuda_fp16.h>\n"}}));
  CHECK_FALSE(only("#include <mem.h>\n", {{"mem.h", "#include \"user.h\"\n"}}));
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  o.include_paths = {dir};
  arch.clear();
  CHECK_FALSE(detail::reads_only_toolkit_headers("#include <cuda_fp16.h>\n", {}, detail::effective_options(o, arch)));
  CHECK_FALSE(detail::reads_only_toolkit_headers("", {}, {"--pre-include=x.h", "-arch=sm_90"}));
}

TEST_CASE("cache: with automatic PCHs off, untraced toolkit-only compiles are cached and user headers still tracked") {
  NoFdLeak fds;
  struct PchOff {
    PchOff() { detail::pch_configure(-1, 0); }
    ~PchOff() { detail::pch_configure(-1, -1); }
  } off;
  const TempDir dir_temp("cache-test");
  const std::string& dir = dir_temp.path;
  Cache cache(disk_config(dir));
  const std::string fp16 = "#include <cuda_fp16.h>\nextern \"C\" __global__ void k(__half* x) { x[0] = x[1]; }\n";
  CHECK(compile(fp16, opts(), &cache)->origin == Origin::compiled);
  {
    Cache fresh(disk_config(dir));
    auto hit = compile(fp16, opts(), &fresh);
    CHECK(hit->origin == Origin::disk_cache);
    REQUIRE(hit->kernels.size() == 1);
    CHECK(hit->kernels[0].signature->to_string() == "(__half*)");
  }
  // An in-memory header that includes a file of a user include dir: traced, the edit is seen.
  const TempDir inc_temp("cache-test");
  const std::string& inc = inc_temp.path;
  spit(inc + "/v.h", "#define VALUE 1.0f\n");
  CompileOptions o = opts();
  o.include_paths = {inc};
  o.headers = {{"mem.h", "#include <v.h>\n"}};
  const std::string src = "#include <mem.h>\nextern \"C\" __global__ void k(float* x) { x[0] = VALUE; }\n";
  auto a = compile(src, o, &cache);
  CHECK(a->origin == Origin::compiled);
  CHECK(compile(src, o, &cache)->origin == Origin::memory_cache);
  spit(inc + "/v.h", "#define VALUE 2.0f\n");
  auto b = compile(src, o, &cache);
  CHECK(b->origin == Origin::compiled);
  CHECK(b->cubin != a->cubin);
}
