// examples/cpp/demo.cpp — the C++ API from an installed jitbridge: compiles kernels with NVRTC, and on a GPU runs them
// through the typed launch() on random data and checks every result against a host reference.
#include <jitbridge/arguments.hpp>
#include <jitbridge/device.hpp>
#include <jitbridge/driver.hpp>
#include <jitbridge/jit.hpp>
#include <jitbridge/launch.hpp>
#include <jitbridge/module.hpp>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace jitbridge;

namespace {

// Three kernels: a plain one, a template (a name expression), and one that needs a CUDA header (cuda_fp16.h), which
// NVRTC finds where jitbridge found NVRTC (a toolkit or the nvidia-* wheels).
const char* const kSource = R"(
#include <cuda_fp16.h>
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, const float* __restrict__ y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
template <class T>
__global__ void scale(const T* __restrict__ x, T* out, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = factor * x[i];
}
extern "C" __global__ void round_to_half(const float* __restrict__ x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __half2float(__float2half_rn(x[i]));
}
)";

// Device memory of `count` T, freed by the destructor (which never throws).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    check(driver().cuMemAlloc(&ptr_, count * sizeof(T)), "cuMemAlloc");
  }
  ~DeviceArray() { driver().cuMemFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return reinterpret_cast<T*>(ptr_); }
  void upload(const std::vector<T>& host) {
    check(driver().cuMemcpyHtoD(ptr_, host.data(), count_ * sizeof(T)), "cuMemcpyHtoD");
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    check(driver().cuMemcpyDtoH(host.data(), ptr_, count_ * sizeof(T)), "cuMemcpyDtoH");
    return host;
  }

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t count_;
};

// Elements of `got` further than `tolerance(want)` from `want`; NaN (the poison) always counts.
template <class T, class Want, class Tolerance>
int count_wrong(const std::vector<T>& got, Want want, Tolerance tolerance) {
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double w = want(i);
    const double g = static_cast<double>(got[i]);
    bad += !(std::fabs(g - w) <= tolerance(w));
  }
  return bad;
}

int report(const char* what, int bad, std::size_t n) {
  std::printf("  %-22s %d of %zu elements wrong\n", what, bad, n);
  return bad != 0;
}

int run_on_gpu(const std::shared_ptr<const Program>& program) {
  const Device& device = Device::get(0);
  device.make_current();
  std::printf("\nRunning on device 0 (%s) with the typed launch():\n", device.arch().c_str());
  auto module = Module::from_program(program);
  const int n = 1 << 20;
  const auto count = static_cast<std::size_t>(n);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(count), y(count);
  for (float& v : x) v = dist(rng);
  for (float& v : y) v = dist(rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  DeviceArray<float> dx(count), dy(count), dout(count);
  dx.upload(x);
  dy.upload(y);
  LaunchConfig config;
  config.grid = {static_cast<unsigned>((n + 255) / 256), 1, 1};
  config.block = {256, 1, 1};
  int failures = 0;

  {  // saxpy, the output poisoned with NaN first so that an element the kernel missed shows
    dout.upload(std::vector<float>(count, nan));
    const float a = dist(rng);
    launch(*module->function("saxpy"), device, config, a, static_cast<const float*>(dx.get()),
           static_cast<const float*>(dy.get()), dout.get(), n);
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    failures += report("saxpy", count_wrong(dout.download(), [&](std::size_t i) { return double(a) * x[i] + y[i]; },
                                            [](double w) { return 1e-5 * (1 + std::fabs(w)); }), count);
  }
  {  // scale<double>
    std::vector<double> xd(x.begin(), x.end());
    DeviceArray<double> dxd(count), doutd(count);
    dxd.upload(xd);
    doutd.upload(std::vector<double>(count, std::numeric_limits<double>::quiet_NaN()));
    const double factor = 0.5 + dist(rng);
    launch(*module->function("scale<double>"), device, config, static_cast<const double*>(dxd.get()), doutd.get(),
           factor, n);
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    failures += report("scale<double>", count_wrong(doutd.download(), [&](std::size_t i) { return factor * xd[i]; },
                                                    [](double w) { return 1e-12 * (1 + std::fabs(w)); }), count);
  }
  {  // round_to_half: within half precision's rounding (2^-11 relative, 2^-24 absolute near 0)
    dout.upload(std::vector<float>(count, nan));
    launch(*module->function("round_to_half"), device, config, static_cast<const float*>(dx.get()), dout.get(), n);
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    failures += report("round_to_half", count_wrong(dout.download(), [&](std::size_t i) { return double(x[i]); },
                                                    [](double w) { return std::ldexp(std::fabs(w), -11) + 1e-7; }),
                       count);
  }
  {  // the argument check: a double array where the kernel takes const float* must be refused before launching
    DeviceArray<double> wrong(count);
    bool refused = false;
    try {
      launch(*module->function("round_to_half"), device, config, static_cast<const double*>(wrong.get()), dout.get(),
             n);
    } catch (const ArgumentError& e) {
      refused = true;
      std::printf("  refused as expected:   %s\n", e.what());
    }
    if (!refused) std::printf("  FAILED: a double* argument for a float* parameter was accepted\n");
    failures += !refused;
  }
  return failures;
}

}  // namespace

int main() {
  try {
    const auto version = nvrtc_version();
    std::printf("jitbridge C++ demo: NVRTC %d.%d, target %s\n\n", version.first, version.second,
                default_arch().c_str());
    CompileOptions options;
    options.program_name = "demo.cu";
    options.name_expressions = {"scale<double>"};
    const auto program = compile(kSource, options);
    std::printf("compiled for %s, %zu bytes of cubin:\n", program->arch.c_str(), program->cubin.size());
    for (const Kernel& k : program->kernels)
      std::printf("  %s%s  (%d registers)\n", k.name.c_str(),
                  k.signature ? k.signature->to_string().c_str() : "(signature unknown)", k.resources.registers);

    std::string why;
    const DriverApi* api = try_driver(&why);
    int devices = 0;
    if (!api || api->cuDeviceGetCount(&devices) != CUDA_SUCCESS || devices == 0) {
      std::printf("\nNo GPU, so the kernels were compiled but not run: %s\n",
                  api ? "the CUDA driver sees no device" : why.c_str());
      // The GPU machine's test runs set JITBRIDGE_REQUIRE_GPU=1: there, not running is a failure.
      const char* required = std::getenv("JITBRIDGE_REQUIRE_GPU");
      return required && std::string(required) == "1" ? 1 : 0;
    }
    const int failures = run_on_gpu(program);
    std::printf(failures ? "\nFAILED: %d check(s) failed\n" : "\nAll kernels ran and were checked.\n", failures);
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jitbridge C++ demo: %s\n", e.what());
    return 1;
  }
}
