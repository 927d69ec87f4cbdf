// test_launch_forms.cpp — the form each C++ launch hands the driver its parameters in (kernelParams, or one buffer
// past kMaxParamPointers parameters or without offsets) and that every form carries the same parameter space, padding
// included, on the fake driver (tests/fuzz/fake_cuda, which rebuilds a kernelParams launch's parameter space from the
// cubin's parameter info, as a driver does). Runs as the ctest `catch2_fake_driver`; with a real driver it skips.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../fuzz/fake_cuda/fake_cuda.h"
#include "jitbridge/device.hpp"
#include "jitbridge/driver.hpp"
#include "jitbridge/jit.hpp"
#include "jitbridge/launch.hpp"

using namespace jitbridge;

namespace {

// The fake driver's record of the last launch, or nullptr under a real driver (the test then skips).
using LastLaunch = void (*)(FakeCudaLaunch*);
LastLaunch fake_or_skip() {
  static LastLaunch read = [] {
    void* lib = try_driver() ? dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) : nullptr;
    return lib ? reinterpret_cast<LastLaunch>(dlsym(lib, "fake_cuda_last_launch")) : nullptr;
  }();
  if (!read) WARN("skipped: the fake driver is not loaded (ctest runs these as catch2_fake_driver)");
  return read;
}

FakeCudaLaunch last(LastLaunch read) {
  FakeCudaLaunch l{};
  read(&l);
  return l;
}

struct Pair {
  char c;
  double d;
};

// More int parameters than a ParamBytes launch passes as pointers: kernel `many`, after a float.
constexpr std::size_t kMany = kMaxParamPointers + 6;  // (a signature past 58 parameters does not demangle)

std::string source() {
  std::string s = "struct Pair { char c; double d; };\n"
                  "extern \"C\" __global__ void padded(char a, double b, const float* p, Pair s, short t) {}\n"
                  "extern \"C\" __global__ void many(float a";
  for (std::size_t i = 0; i < kMany; ++i) s += ", int p" + std::to_string(i);
  return s + ") {}\n";
}

std::shared_ptr<Module> module() {
  static std::shared_ptr<Module> m = [] {
    CompileOptions o;
    o.arch = "sm_90";
    return Module::from_program(compile(source(), o));
  }();
  return m;
}

LaunchConfig one_block() {
  LaunchConfig c;
  c.grid = {2, 1, 1};
  c.block = {32, 1, 1};
  return c;
}

// The parameter space the driver must see, padding zeros included.
std::vector<unsigned char> space(std::size_t bytes, const std::vector<std::pair<std::size_t, std::vector<unsigned char>>>& at) {
  std::vector<unsigned char> out(bytes, 0);
  for (const auto& [offset, value] : at) std::memcpy(out.data() + offset, value.data(), value.size());
  return out;
}

template <class T>
std::vector<unsigned char> bytes_of(const T& v) {
  std::vector<unsigned char> out(sizeof v);
  std::memcpy(out.data(), &v, sizeof v);
  return out;
}

void check_received(const FakeCudaLaunch& l, const std::vector<unsigned char>& want, bool pointer_form) {
  CHECK(l.pointer_form == (pointer_form ? 1 : 0));
  CHECK(l.buffer_form == (pointer_form ? 0 : 1));
  REQUIRE(l.param_bytes == want.size());
  CHECK(std::memcmp(l.params, want.data(), want.size()) == 0);
}

// Launches `f` with `space` as a ParamBytes that carries its layout's offsets.
void launch_space(const Function& f, const Device& dev, const std::vector<unsigned char>& space) {
  const ParamLayout* layout = f.param_layout();
  REQUIRE(layout);
  REQUIRE(layout->bytes == space.size());
  launch(f, one_block(), dev, ParamBytes{space.data(), space.size(), layout->offsets.data(), layout->offsets.size()});
}

// A test's kernel `name` on device 0 and the fake driver's record; `read` null (the test skips) under a real driver.
struct Case {
  LastLaunch read = fake_or_skip();
  const Device* dev = read ? &Device::get(0) : nullptr;
  std::shared_ptr<Function> f;
  explicit Case(const char* name) {
    if (read) f = module()->function(name);
  }
};

template <std::size_t... I>
void launch_many(const Function& f, const Device& dev, std::index_sequence<I...>) {
  launch(f, dev, one_block(), 1.5f, static_cast<int>(I * 7 + 1)...);
}

// 4 KiB of (fake) device memory on `dev`.
CUdeviceptr alloc_4k(const Device& dev) {
  const ContextGuard context(dev);
  CUdeviceptr p = 0;
  REQUIRE(driver().cuMemAlloc(&p, 4096) == CUDA_SUCCESS);
  return p;
}

// A Pair whose own padding is zeros, so that the expected bytes are known.
Pair pair(char c, double d) {
  Pair s;
  std::memset(&s, 0, sizeof s);
  s.c = c;
  s.d = d;
  return s;
}

}  // namespace

TEST_CASE("the typed launch passes kernelParams; ParamBytes with offsets too, without them one buffer: same bytes",
          "[fake_driver]") {
  const Case t("padded");
  if (!t.read) return;
  const Device& dev = *t.dev;
  const CUdeviceptr p = alloc_4k(dev);
  const Pair s = pair(3, 4.5);
  const auto* pointer = reinterpret_cast<const float*>(p);
  // padded(char a @0, double b @8, const float* p @16, Pair s @24, short t @40): 42 bytes, gaps 1-7 and 17-23 in s.
  const std::vector<unsigned char> want =
      space(42, {{0, bytes_of(char{7})}, {8, bytes_of(2.5)}, {16, bytes_of(pointer)}, {24, bytes_of(s)},
                 {40, bytes_of(std::int16_t{-2})}});
  launch(*t.f, dev, one_block(), char{7}, 2.5, pointer, s, std::int16_t{-2});
  const FakeCudaLaunch typed = last(t.read);
  CHECK((typed.grid[0] == 2 && typed.block[0] == 32));
  check_received(typed, want, true);

  launch_space(*t.f, dev, want);
  check_received(last(t.read), want, true);
  launch(*t.f, one_block(), dev, ParamBytes{want.data(), want.size()});  // no offsets
  check_received(last(t.read), want, false);

  const ContextGuard context(dev);
  CHECK(driver().cuMemFree(p) == CUDA_SUCCESS);
}

TEST_CASE("a kernel with more than kMaxParamPointers parameters: the typed launch's pointers, ParamBytes's buffer",
          "[fake_driver]") {
  const Case t("many");
  if (!t.read) return;
  std::vector<std::pair<std::size_t, std::vector<unsigned char>>> values{{0, bytes_of(1.5f)}};
  for (std::size_t i = 0; i < kMany; ++i) values.push_back({4 + 4 * i, bytes_of(static_cast<int>(i * 7 + 1))});
  const std::vector<unsigned char> want = space(4 + 4 * kMany, values);

  launch_many(*t.f, *t.dev, std::make_index_sequence<kMany>{});
  check_received(last(t.read), want, true);  // an ArgBuffer's pointers live in the buffer: no bound
  launch_space(*t.f, *t.dev, want);  // (it REQUIREs the layout)
  CHECK(t.f->param_layout()->offsets.size() == kMany + 1);
  check_received(last(t.read), want, false);  // past the stack array's bound: one buffer
}

TEST_CASE("the typed launch's fast path and its full path pack the same bytes; a declined argument gets the full "
          "path's error", "[fake_driver]") {
  const Case t("padded");
  if (!t.read) return;
  const Device& dev = *t.dev;
  const CUdeviceptr p = alloc_4k(dev);
  const Pair s = pair(-1, -0.25);
  const auto* pointer = reinterpret_cast<const float*>(p);
  const std::vector<unsigned char> want =
      space(42, {{0, bytes_of(char{-5})}, {8, bytes_of(1e300)}, {16, bytes_of(pointer)}, {24, bytes_of(s)},
                 {40, bytes_of(std::int16_t{300})}});
  // Fast: every argument is one the acceptors take. Full: a bool for `short t` (the acceptors take only signed
  // integers there) sends the launch to pack_all, which writes it as 1.
  launch(*t.f, dev, one_block(), char{-5}, 1e300, pointer, s, std::int16_t{300});
  check_received(last(t.read), want, true);
  const std::vector<unsigned char> want_full =
      space(42, {{0, bytes_of(char{-5})}, {8, bytes_of(0.5)}, {16, bytes_of(pointer)}, {24, bytes_of(s)},
                 {40, bytes_of(std::int16_t{1})}});
  launch(*t.f, dev, one_block(), char{-5}, 0.5f, pointer, s, true);
  check_received(last(t.read), want_full, true);
  launch(*t.f, dev, one_block(), char{-5}, 0.5, pointer, s, std::int16_t{1});  // the same values, fast
  check_received(last(t.read), want_full, true);

  // Refused: nothing reaches the driver, and the message is pack_all's, naming the argument.
  const std::uint64_t before = last(t.read).count;
  const auto* doubles = reinterpret_cast<const double*>(p);
  CHECK_THROWS_WITH(launch(*t.f, dev, one_block(), char{-5}, 0.5, doubles, s, std::int16_t{300}),
                    Catch::Contains("padded") && Catch::Contains("argument 2") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(launch(*t.f, dev, one_block(), char{-5}, 0.5, pointer, s, 70000),
                    Catch::Contains("argument 4") && Catch::Contains("short"));
  CHECK_THROWS_WITH(launch(*t.f, dev, one_block(), char{-5}, 0.5, pointer, s, std::uint16_t{300}),
                    Catch::Contains("argument 4 (short): 300 does not fit in 'short'"));  // unsigned: never signed
  CHECK_THROWS_AS(launch(*t.f, dev, one_block(), char{-5}, 0.5, pointer, s), ArgumentError);  // 4 of 5
  CHECK(last(t.read).count == before);

  const ContextGuard context(dev);
  CHECK(driver().cuMemFree(p) == CUDA_SUCCESS);
}
