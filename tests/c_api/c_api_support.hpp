// c_api_support.hpp — shared by the C interface tests: the table of this build, its last error message, and what
// they read back from the fake driver (tests/fuzz/fake_cuda): the last launch it recorded, and saxpy's parameters
// (float a, const float* x, float* y, int n) decoded from it.
#pragma once

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "../fuzz/fake_cuda/fake_cuda.h"
#include "jitbridge/c_api.h"

namespace jitbridge_test {

// This build's C interface table (jitbridge_c_api_get), failing the test with the reason if it is refused.
inline const JitbridgeCApi& c_api() {
  char why[256] = "";
  const JitbridgeCApi* t = jitbridge_c_api_get(JITBRIDGE_C_API_MAJOR, JITBRIDGE_C_API_MINOR, why, sizeof why);
  INFO(why);
  REQUIRE(t);
  return *t;
}

// The calling thread's last error message (last_error()).
inline std::string message() {
  const char* m = nullptr;
  c_api().last_error(&m, nullptr);
  return m ? m : "";
}

// The fake driver's record of the last launch; fails the test on a real driver (it has no such symbol).
inline FakeCudaLaunch last_launch() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib);
  auto read = reinterpret_cast<void (*)(FakeCudaLaunch*)>(dlsym(lib, "fake_cuda_last_launch"));
  REQUIRE(read);  // the fake driver only
  FakeCudaLaunch l{};
  read(&l);
  dlclose(lib);
  return l;
}

struct SaxpyParams {
  float a = 0;
  std::uint64_t x = 0, y = 0;
  int n = 0;
};

// saxpy's parameter bytes in `l`: float, 4 bytes of padding, two pointers, int (28 bytes).
inline SaxpyParams saxpy_params(const FakeCudaLaunch& l) {
  REQUIRE(l.param_bytes == 28);
  SaxpyParams p;
  std::memcpy(&p.a, l.params, 4);
  std::memcpy(&p.x, l.params + 8, 8);
  std::memcpy(&p.y, l.params + 16, 8);
  std::memcpy(&p.n, l.params + 24, 4);
  return p;
}

}  // namespace jitbridge_test
