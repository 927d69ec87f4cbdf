// test_driver.cpp — the run-time loaded driver: a clear error without one, real launches with one.
#include <catch2/catch.hpp>

#include "gpu_or_skip.hpp"

#include <cstdlib>
#include <random>

#include "jitbridge/cache.hpp"
#include "jitbridge/driver.hpp"
#include "jitbridge/jit.hpp"
#include "jitbridge/module.hpp"

using namespace jitbridge;
using jitbridge::testing::driver_or_skip;
using jitbridge::testing::gpu_required;

TEST_CASE("driver(): throws NoDriverError with the reason, or loads every required entry") {
  std::string why;
  const DriverApi* api = try_driver(&why);
  if (!api) {
    CHECK_FALSE(gpu_required());
    CHECK(why.find("CUDA driver") != std::string::npos);
    CHECK_THROWS_AS(driver(), NoDriverError);
    CHECK_THROWS_WITH(driver(), Catch::Contains("CUDA driver"));
    CHECK(default_arch() == (std::getenv("JITBRIDGE_ARCH") ? std::getenv("JITBRIDGE_ARCH") : kDefaultArch));
  } else {
    CHECK(&driver() == api);
    CHECK(api->version >= 12000);
    CHECK(api->cuLaunchKernel != nullptr);
    CHECK(api->cuLibraryLoadData != nullptr);
  }
}

TEST_CASE("DriverError names the call and the driver's reason") {
  DriverError e("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(e.code() == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(std::string(e.what()).find("cuMemAlloc failed") == 0);
  CHECK_NOTHROW(check(CUDA_SUCCESS, "x"));
  CHECK_THROWS_AS(check(CUDA_ERROR_INVALID_VALUE, "x"), DriverError);
}

TEST_CASE("GPU: a compiled kernel loads, matches its reported resources, and computes") {
  const DriverApi* api = driver_or_skip();
  if (!api) return;
  CUdevice dev = 0;
  check(api->cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx = nullptr;
  check(api->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(api->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  int major = 0, minor = 0;
  check(api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "attr");
  check(api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "attr");
  CHECK(default_arch() == "sm_" + std::to_string(major) + std::to_string(minor));

  Cache cache(CacheConfig{false, "", 1 << 20});
  auto program = compile(R"(
#include <cuda_fp16.h>
typedef float real;
extern "C" __global__ void axpb(const real* __restrict__ x, real* y, __half a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __half2float(a) * x[i] + 1.0f;
})", CompileOptions{}, &cache);
  CHECK(program->arch == default_arch());
  const Kernel* k = program->find_kernel("axpb");
  REQUIRE(k);
  REQUIRE(k->signature);
  CHECK(k->signature->to_string() == "(float const*, float*, __half, int)");

  CUlibrary lib = nullptr;
  check(api->cuLibraryLoadData(&lib, program->cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "cuLibraryLoadData");
  CUkernel kernel = nullptr;
  check(api->cuLibraryGetKernel(&kernel, lib, k->lowered_name.c_str()), "cuLibraryGetKernel");
  CUfunction fn = nullptr;
  check(api->cuKernelGetFunction(&fn, kernel), "cuKernelGetFunction");
  int regs = 0, local = 0;
  check(api->cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "cuFuncGetAttribute");
  check(api->cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn), "cuFuncGetAttribute");
  CHECK(regs == k->resources.registers);
  CHECK(static_cast<std::size_t>(local) == k->resources.local_bytes);
  if (api->cuKernelGetParamInfo) {
    for (std::size_t i = 0; i < k->signature->params.size(); ++i) {
      std::size_t offset = 0, size = 0;
      check(api->cuKernelGetParamInfo(kernel, i, &offset, &size), "cuKernelGetParamInfo");
      CHECK(size == k->signature->params[i].size);
    }
  }

  const int n = 1000;
  std::vector<float> x(n), y(n, -12345.0f);  // poison
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (float& v : x) v = dist(rng);
  CUdeviceptr dx = 0, dy = 0;
  check(api->cuMemAlloc(&dx, n * sizeof(float)), "cuMemAlloc");
  check(api->cuMemAlloc(&dy, n * sizeof(float)), "cuMemAlloc");
  check(api->cuMemcpyHtoD(dx, x.data(), n * sizeof(float)), "cuMemcpyHtoD");
  check(api->cuMemcpyHtoD(dy, y.data(), n * sizeof(float)), "cuMemcpyHtoD");
  unsigned short a_bits = 0x4000;  // 2.0 as IEEE half
  int count = n;
  void* args[] = {&dx, &dy, &a_bits, &count};
  check(api->cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
  check(api->cuCtxSynchronize(), "cuCtxSynchronize");
  check(api->cuMemcpyDtoH(y.data(), dy, n * sizeof(float)), "cuMemcpyDtoH");
  for (int i = 0; i < n; ++i) REQUIRE(y[i] == Approx(2.0f * x[i] + 1.0f));
  check(api->cuMemFree(dx), "cuMemFree");
  check(api->cuMemFree(dy), "cuMemFree");
  // A signature that disagrees with the driver's parameter layout is refused when the Function is made
  // (launches would pass wrong bytes). Here __half claims 4 bytes, which also moves `n`.
  if (api->cuKernelGetParamInfo) {
    check(api->cuCtxSetCurrent(nullptr), "cuCtxSetCurrent");  // made before any context is current: still checked
    CHECK_NOTHROW(Function(nullptr, kernel, "axpb", k));
    CUcontext after = nullptr;
    check(api->cuCtxGetCurrent(&after), "cuCtxGetCurrent");
    CHECK(after == nullptr);  // and the caller's (lack of a) context is left as it was
    check(api->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    Kernel wrong = *k;
    wrong.signature->params[2].size = 4;
    wrong.signature->params[2].align = 4;
    CHECK_THROWS_AS(Function(nullptr, kernel, "axpb", &wrong), std::logic_error);
    CHECK_THROWS_WITH(Function(nullptr, kernel, "axpb", &wrong),
                      Catch::Contains("parameter 2 (__half) is 4 bytes at offset 16 by the signature, 2 bytes at "
                                      "offset 16 by the driver"));
  }
  check(api->cuLibraryUnload(lib), "cuLibraryUnload");
  check(api->cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
}
