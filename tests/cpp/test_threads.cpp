// test_threads.cpp — [threads]: 8 threads compiling, racing on the cache, packing and launching at once (TSan runs these).
#include <catch2/catch.hpp>
#include <dirent.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu_or_skip.hpp"
#include "temp_dir.hpp"
#include "jitbridge/arguments.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/jit.hpp"
#include "jitbridge/launch.hpp"

using namespace jitbridge;

namespace {

constexpr int kThreads = 8;

// Holds every thread until all `count` have arrived, so that their work overlaps (no sleeping).
class StartLine {
 public:
  explicit StartLine(int count) : left_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--left_ == 0) {
      open_.notify_all();
      return;
    }
    open_.wait(lock, [this] { return left_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable open_;
  int left_;
};

// Runs body(i) on threads 0..count-1, all released together. Catch2's assertions are not
// thread-safe, so a body records what it saw and the test checks it afterwards on this thread;
// an exception escaping a body is recorded as that thread's error.
std::vector<std::string> run_together(int count, const std::function<void(int)>& body) {
  StartLine start(count);
  std::vector<std::string> errors(static_cast<std::size_t>(count));
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        body(i);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(i)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

void check_no_errors(const std::vector<std::string>& errors) {
  for (std::size_t i = 0; i < errors.size(); ++i) {
    INFO("thread " << i);
    CHECK(errors[i] == "");
  }
}

using jitbridge::testing::TempDir;  // temp_dir.hpp

bool is_entry_name(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".jbc") == 0;
}

// The names in the cache's entry directory but the lock files beside entries (<key>.lock):
// finished entries (*.jbc) and anything else (a leftover temporary file would show up here).
std::vector<std::string> entry_dir_names(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir((dir + "/v1").c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      const bool lock = n.size() > 5 && n.compare(n.size() - 5, 5, ".lock") == 0;
      if (n != "." && n != ".." && !lock) out.push_back(n);
    }
    ::closedir(d);
  }
  return out;
}

CompileOptions sm90() {
  CompileOptions o;
  o.arch = "sm_90";
  return o;
}

std::string variant_source(int variant) {
  return "extern \"C\" __global__ void scale_" + std::to_string(variant) + "(float* x, int n) {\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) x[i] = x[i] * " + std::to_string(variant + 2) + ".0f + " + std::to_string(variant) + ".0f;\n}\n";
}

// What a serial compile in a cache of its own gives for `source`.
std::shared_ptr<const Program> reference(const std::string& source) {
  Cache alone(CacheConfig{false, "", 1 << 20});
  return compile(source, sm90(), &alone);
}

}  // namespace

TEST_CASE("threads: 8 threads compile the same and different sources into one memory + disk cache", "[threads]") {
  const TempDir temp;
  const std::string& dir = temp.path;
  constexpr int kVariants = 4;  // thread i compiles variant i % 4: each source by two threads at once
  std::vector<std::shared_ptr<const Program>> expected;
  for (int v = 0; v < kVariants; ++v) expected.push_back(reference(variant_source(v)));

  Cache cache(CacheConfig{true, dir, 1 << 30});
  std::vector<std::shared_ptr<const Program>> got(kThreads);
  check_no_errors(run_together(kThreads, [&](int i) {
    got[static_cast<std::size_t>(i)] = compile(variant_source(i % kVariants), sm90(), &cache);
  }));
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    const Program& p = *got[static_cast<std::size_t>(i)];
    const Program& want = *expected[static_cast<std::size_t>(i % kVariants)];
    CHECK(p.cubin == want.cubin);
    REQUIRE(p.kernels.size() == 1);
    CHECK(p.kernels[0].name == "scale_" + std::to_string(i % kVariants));
    REQUIRE(p.kernels[0].signature);
    CHECK(p.kernels[0].signature->to_string() == "(float*, int)");
  }
  CacheInfo info = cache.info();
  CHECK(info.entries == kVariants);
  CHECK(info.memory_entries == kVariants);
  for (const std::string& name : entry_dir_names(dir)) CHECK(is_entry_name(name));

  // Again from 8 threads, now memory hits on the shared cache and disk hits in fresh ones.
  std::vector<Origin> shared_origin(kThreads), fresh_origin(kThreads);
  std::vector<std::string> shared_cubin(kThreads), fresh_cubin(kThreads);
  check_no_errors(run_together(kThreads, [&](int i) {
    const auto k = static_cast<std::size_t>(i);
    auto a = compile(variant_source(i % kVariants), sm90(), &cache);
    shared_origin[k] = a->origin;
    shared_cubin[k] = a->cubin;
    Cache fresh(CacheConfig{true, dir, 1 << 30});
    auto b = compile(variant_source(i % kVariants), sm90(), &fresh);
    fresh_origin[k] = b->origin;
    fresh_cubin[k] = b->cubin;
  }));
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    const auto k = static_cast<std::size_t>(i);
    CHECK(shared_origin[k] == Origin::memory_cache);
    CHECK(fresh_origin[k] == Origin::disk_cache);
    CHECK(shared_cubin[k] == expected[static_cast<std::size_t>(i % kVariants)]->cubin);
    CHECK(fresh_cubin[k] == expected[static_cast<std::size_t>(i % kVariants)]->cubin);
  }
}

TEST_CASE("threads: 8 caches store and load one key at once; one whole entry, no temporary left", "[threads]") {
  const TempDir temp;
  const std::string& dir = temp.path;
  const std::string source = variant_source(10);
  const auto expected = reference(source);
  std::vector<std::string> cubin(kThreads);
  std::vector<std::uint64_t> compiles(kThreads);
  check_no_errors(run_together(kThreads, [&](int i) {
    Cache own(CacheConfig{true, dir, 1 << 30});  // as 8 processes sharing the directory would
    cubin[static_cast<std::size_t>(i)] = compile(source, sm90(), &own)->cubin;
    compiles[static_cast<std::size_t>(i)] = own.info().compiles;
  }));
  for (const std::string& c : cubin) CHECK(c == expected->cubin);
  std::uint64_t total = 0;
  for (std::uint64_t n : compiles) total += n;
  CHECK(total == 1);  // one compiled under the key's lock file, the others waited for its entry
  const std::vector<std::string> names = entry_dir_names(dir);
  REQUIRE(names.size() == 1);
  CHECK(is_entry_name(names[0]));
  Cache reader(CacheConfig{true, dir, 1 << 30});
  auto again = compile(source, sm90(), &reader);
  CHECK(again->origin == Origin::disk_cache);
  CHECK(again->cubin == expected->cubin);
}

TEST_CASE("threads: a writer clearing and rewriting an entry races readers of it", "[threads]") {
  const TempDir temp;
  const std::string& dir = temp.path;
  const std::string source = variant_source(20);
  const auto expected = reference(source);
  Cache shared(CacheConfig{true, dir, 1 << 30});
  constexpr int kRounds = 3;
  // Thread 0 writes: clears everything (memory and disk) and compiles the entry back. Odd threads
  // read through the shared cache (its memory side and mutex race the writer's clear()); even
  // ones through a fresh cache per round (the disk side races the unlink and the rename).
  std::vector<std::vector<std::string>> seen(kThreads);
  check_no_errors(run_together(kThreads, [&](int i) {
    auto& mine = seen[static_cast<std::size_t>(i)];
    for (int round = 0; round < kRounds; ++round) {
      if (i == 0) {
        shared.clear();
        mine.push_back(compile(source, sm90(), &shared)->cubin);
      } else if (i % 2 == 1) {
        mine.push_back(compile(source, sm90(), &shared)->cubin);
        (void)shared.info();
      } else {
        Cache fresh(CacheConfig{true, dir, 1 << 30});
        mine.push_back(compile(source, sm90(), &fresh)->cubin);
      }
    }
  }));
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    REQUIRE(seen[static_cast<std::size_t>(i)].size() == kRounds);
    for (const std::string& c : seen[static_cast<std::size_t>(i)]) CHECK(c == expected->cubin);
  }
  for (const std::string& name : entry_dir_names(dir)) CHECK(is_entry_name(name));
  Cache reader(CacheConfig{true, dir, 1 << 30});
  CHECK(compile(source, sm90(), &reader)->cubin == expected->cubin);
}

namespace {

const char* const kPackSource = R"(
#include <cuda_fp16.h>
struct Params { double scale; int n; };
extern "C" __global__ void k(const float* a, float* b, int n, unsigned char u, bool flag, float f, double d,
                             __half h, Params p, void* raw, long long big) {}
)";

struct Params {
  double scale;
  int n;
};

// Thread t's arguments (values differ per thread), in parameter order, over shared read-only views.
std::vector<ArgValue> pack_args(int t, const ArrayView& floats, const ArrayView& bytes_view, const Params& params) {
  std::vector<ArgValue> a(11);
  a[0].kind = a[1].kind = a[9].kind = ArgValue::Kind::array;
  a[0].array = a[1].array = &floats;
  a[9].array = &bytes_view;
  a[2].kind = ArgValue::Kind::signed_integer;
  a[2].i = 1000 + t;
  a[3].kind = ArgValue::Kind::signed_integer;
  a[3].i = 200 + t;
  a[4].kind = ArgValue::Kind::boolean;
  a[4].i = t % 2;
  a[5].kind = a[6].kind = a[7].kind = ArgValue::Kind::floating;
  a[5].f = 0.5 * t;
  a[6].f = -0.25 * t;
  a[7].f = 2.0 + t;
  a[8].kind = ArgValue::Kind::bytes;
  a[8].data = &params;
  a[8].size = sizeof params;
  a[10].kind = ArgValue::Kind::signed_integer;
  a[10].i = (std::int64_t{1} << 40) + t;
  for (ArgValue& v : a) v.python_type = "C++ value";
  return a;
}

ArrayView device_view(const char* dtype, std::uintptr_t address) {
  ArrayView v;
  v.data = reinterpret_cast<void*>(address);
  v.device = {kDLCUDA, 0};
  v.dtype = *dtype_from_name(dtype);
  std::int64_t shape[1] = {16};
  v.shape.assign(shape, 1);
  v.strides = contiguous_strides(v.shape);
  return v;
}

// Each parameter's bytes, cut out of a packed buffer at the signature's offsets.
std::vector<std::string> packed_params(const Signature& sig, const ArgBuffer& buf) {
  std::vector<std::string> out;
  const std::vector<std::size_t> offsets = param_offsets(sig);
  for (std::size_t i = 0; i < sig.params.size(); ++i)
    out.emplace_back(reinterpret_cast<const char*>(buf.bytes()) + offsets[i], sig.params[i].size);
  return out;
}

}  // namespace

TEST_CASE("threads: 8 threads pack arguments against one shared signature and plan", "[threads]") {
  Cache cache(CacheConfig{false, "", 1 << 20});
  auto program = compile(kPackSource, sm90(), &cache);
  const Kernel* kernel = program->find_kernel("k");
  REQUIRE(kernel);
  REQUIRE(kernel->signature);
  const Signature& sig = *kernel->signature;
  const std::vector<ParamPlan> plan = plan_signature(sig);
  const ArrayView floats = device_view("float32", 0x7f0000001000);
  const ArrayView bytes_view = device_view("int8", 0x7f0000002000);
  const Params params{3.0, 7};

  // Serially first: what each thread must get, and the error a too-large int must give.
  std::vector<std::vector<std::string>> expected;
  for (int t = 0; t < kThreads; ++t) {
    ArgBuffer buf;
    buf.reset(sig);
    PackResult where;
    const std::vector<ArgValue> a = pack_args(t, floats, bytes_view, params);
    for (std::size_t i = 0; i < a.size(); ++i) pack_argument("k", sig, plan, i, a[i], buf, where);
    REQUIRE(buf.param_space());
    expected.push_back(packed_params(sig, buf));
  }
  int n3 = 0;
  std::memcpy(&n3, expected[3][2].data(), sizeof n3);
  CHECK(n3 == 1003);  // thread 3's n
  ArgValue too_big;
  too_big.kind = ArgValue::Kind::signed_integer;
  too_big.i = std::int64_t{1} << 40;
  too_big.python_type = "int";
  // Packed alone into a buffer of its own (as each thread does below).
  auto pack_too_big = [&](ArgBuffer& buf) {
    buf.reset(sig);
    PackResult where;
    pack_argument("k", sig, plan, 2, too_big, buf, where);
  };
  std::string overflow_message;
  try {
    ArgBuffer buf;
    pack_too_big(buf);
  } catch (const ArgumentError& e) {
    CHECK(e.kind() == ArgumentError::Kind::overflow);
    overflow_message = e.what();
  }
  REQUIRE_FALSE(overflow_message.empty());

  constexpr int kIterations = 300;
  std::vector<int> mismatches(kThreads), wrong_errors(kThreads);
  std::vector<std::string> texts(kThreads);
  check_no_errors(run_together(kThreads, [&](int t) {
    const auto k = static_cast<std::size_t>(t);
    ArgBuffer buf, err;
    const std::vector<ArgValue> a = pack_args(t, floats, bytes_view, params);
    for (int it = 0; it < kIterations; ++it) {
      buf.reset(sig);
      PackResult where;
      for (std::size_t i = 0; i < a.size(); ++i) pack_argument("k", sig, plan, i, a[i], buf, where);
      if (packed_params(sig, buf) != expected[k] || where.device != 0 || where.first_array != 0) ++mismatches[k];
      try {
        pack_too_big(err);
        ++wrong_errors[k];
      } catch (const ArgumentError& e) {
        if (e.what() != overflow_message) ++wrong_errors[k];
      }
    }
    texts[k] = sig.to_string() + arity_message("k", sig, 3);
  }));
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    const auto k = static_cast<std::size_t>(t);
    CHECK(mismatches[k] == 0);
    CHECK(wrong_errors[k] == 0);
    CHECK(texts[k] == sig.to_string() + arity_message("k", sig, 3));
  }
}

TEST_CASE("threads: GPU: 8 threads compile, load and launch at once, and share one Function", "[threads]") {
  const DriverApi* api = jitbridge::testing::driver_or_skip();
  if (!api) return;
  const Device& device = Device::get(0);
  Cache cache(CacheConfig{false, "", 1 << 20});
  CompileOptions native;  // the GPU's own arch
  auto shared_program = compile(variant_source(30), native, &cache);
  auto shared_module = Module::from_program(shared_program);
  const std::shared_ptr<Function> shared = shared_module->function("scale_30");
  constexpr int n = 4096;
  // Thread i: its own program (variant i % 4) and the shared Function, each on a buffer of its own
  // filled with i; results copied back and checked here.
  std::vector<std::vector<float>> own_out(kThreads), shared_out(kThreads);
  check_no_errors(run_together(kThreads, [&](int i) {
    const int v = i % 4;
    auto program = compile(variant_source(v), native, &cache);
    auto module = Module::from_program(program);
    const std::shared_ptr<Function> own = module->function("scale_" + std::to_string(v));
    ContextGuard guard(device);
    std::vector<float> host(n, static_cast<float>(i));
    CUdeviceptr a = 0, b = 0;
    check(api->cuMemAlloc(&a, n * sizeof(float)), "cuMemAlloc");
    check(api->cuMemAlloc(&b, n * sizeof(float)), "cuMemAlloc");
    check(api->cuMemcpyHtoD(a, host.data(), n * sizeof(float)), "cuMemcpyHtoD");
    check(api->cuMemcpyHtoD(b, host.data(), n * sizeof(float)), "cuMemcpyHtoD");
    LaunchConfig config;
    config.grid.x = (n + 127) / 128;
    config.block.x = 128;
    launch(*own, device, config, reinterpret_cast<float*>(a), n);
    launch(*shared, device, config, reinterpret_cast<float*>(b), n);
    check(api->cuCtxSynchronize(), "cuCtxSynchronize");
    own_out[static_cast<std::size_t>(i)].resize(n);
    shared_out[static_cast<std::size_t>(i)].resize(n);
    check(api->cuMemcpyDtoH(own_out[static_cast<std::size_t>(i)].data(), a, n * sizeof(float)), "cuMemcpyDtoH");
    check(api->cuMemcpyDtoH(shared_out[static_cast<std::size_t>(i)].data(), b, n * sizeof(float)), "cuMemcpyDtoH");
    check(api->cuMemFree(a), "cuMemFree");
    check(api->cuMemFree(b), "cuMemFree");
  }));
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    const int v = i % 4;
    const auto k = static_cast<std::size_t>(i);
    REQUIRE(own_out[k].size() == static_cast<std::size_t>(n));
    REQUIRE(shared_out[k].size() == static_cast<std::size_t>(n));
    int wrong = 0;
    for (int j = 0; j < n; ++j) {
      wrong += own_out[k][static_cast<std::size_t>(j)] != static_cast<float>(i * (v + 2) + v);
      wrong += shared_out[k][static_cast<std::size_t>(j)] != static_cast<float>(i * 32 + 30);
    }
    CHECK(wrong == 0);
  }
}
