// demo.cpp — compiles every example kernel, prints signatures and resources, and runs them on a GPU if there is one.
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <cmath>
#include <dirent.h>
#include <fstream>
#include <random>
#include <sstream>

#include "jitbridge/driver.hpp"
#include "jitbridge/jit.hpp"

using namespace jitbridge;

namespace {

const char* origin_name(Origin o) {
  switch (o) {
    case Origin::compiled: return "compiled";
    case Origin::memory_cache: return "memory cache";
    case Origin::disk_cache: return "disk cache";
  }
  return "?";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::shared_ptr<const Program> compile_example(const std::string& dir, const std::string& file) {
  CompileOptions o;
  o.program_name = file;
  if (file == "block_sum.cu") o.name_expressions = {"block_sum<float, 256>", "block_sum<double, 128>"};
  auto p = compile(read_file(dir + "/" + file), o);
  fmt::print("{} -> {} ({}, {} bytes of cubin)\n", file, p->arch, origin_name(p->origin), p->cubin.size());
  for (const Kernel& k : p->kernels) {
    const Resources& r = k.resources;
    fmt::print("  {}{}\n      regs={} smem={} lmem={} cmem={} spills={}/{}\n", k.name,
               k.signature ? k.signature->to_string() : "(signature unknown)", r.registers, r.shared_bytes,
               r.local_bytes, r.const_bytes, r.spill_store_bytes, r.spill_load_bytes);
  }
  return p;
}

// A loaded kernel plus the device buffers of one run; everything is freed by the destructor.
struct GpuRun {
  const DriverApi& api;
  CUlibrary lib = nullptr;
  std::vector<CUdeviceptr> buffers;
  explicit GpuRun(const DriverApi& a, const Program& p) : api(a) {
    check(api.cuLibraryLoadData(&lib, p.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
  }
  ~GpuRun() {
    for (CUdeviceptr b : buffers) api.cuMemFree(b);
    if (lib) api.cuLibraryUnload(lib);
  }
  CUfunction function(const Kernel& k) {
    CUkernel kernel = nullptr;
    CUfunction fn = nullptr;
    check(api.cuLibraryGetKernel(&kernel, lib, k.lowered_name.c_str()), "cuLibraryGetKernel");
    check(api.cuKernelGetFunction(&fn, kernel), "cuKernelGetFunction");
    return fn;
  }
  template <class T>
  CUdeviceptr upload(const std::vector<T>& host) {
    CUdeviceptr d = 0;
    check(api.cuMemAlloc(&d, host.size() * sizeof(T)), "cuMemAlloc");
    buffers.push_back(d);
    check(api.cuMemcpyHtoD(d, host.data(), host.size() * sizeof(T)), "cuMemcpyHtoD");
    return d;
  }
  template <class T>
  void download(std::vector<T>& host, CUdeviceptr d) {
    check(api.cuMemcpyDtoH(host.data(), d, host.size() * sizeof(T)), "cuMemcpyDtoH");
  }
  void launch(CUfunction fn, unsigned grid, unsigned block, void** args) {
    check(api.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
    check(api.cuCtxSynchronize(), "cuCtxSynchronize");
  }
};

int run_on_gpu(const DriverApi& api, const std::vector<std::shared_ptr<const Program>>& programs) {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  check(api.cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(api.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  char name[256] = {};
  api.cuDeviceGetName(name, sizeof name, dev);
  fmt::print("\nRunning on {}:\n", name);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  int failures = 0;
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (float& v : x) v = dist(rng);
  for (float& v : y) v = dist(rng);

  {  // saxpy
    GpuRun run(api, *programs[0]);
    CUdeviceptr dx = run.upload(x), dy = run.upload(y);
    float a = dist(rng);
    int count = n;
    void* args[] = {&a, &dx, &dy, &count};
    run.launch(run.function(*programs[0]->find_kernel("saxpy")), (n + 255) / 256, 256, args);
    std::vector<float> out(n);
    run.download(out, dy);
    int bad = 0;
    for (int i = 0; i < n; ++i) bad += std::fabs(out[i] - (a * x[i] + y[i])) > 1e-5f * (1 + std::fabs(out[i]));
    fmt::print("  saxpy               {} of {} elements wrong\n", bad, n);
    failures += bad != 0;
  }
  {  // scale_half
    GpuRun run(api, *programs[1]);
    struct Params { double scale; float offset; } p{1.5, 0.25f};
    std::vector<__half> poison(n, __float2half(-1000.0f));
    CUdeviceptr dx = run.upload(x), dout = run.upload(poison);
    int count = n;
    void* args[] = {&dx, &dout, &count, &p};
    run.launch(run.function(*programs[1]->find_kernel("scale_half")), (n + 255) / 256, 256, args);
    std::vector<__half> out(n);
    run.download(out, dout);
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      float want = x[i] * 1.5f + 0.25f;
      bad += std::fabs(__half2float(out[i]) - want) > 2e-3f * (1 + std::fabs(want));
    }
    fmt::print("  scale_half          {} of {} elements wrong\n", bad, n);
    failures += bad != 0;
  }
  {  // block_sum<float, 256>
    GpuRun run(api, *programs[2]);
    const int blocks = n / 256;
    std::vector<float> partial(blocks, -1.0e30f);
    CUdeviceptr dx = run.upload(x), dp = run.upload(partial);
    int count = n;
    void* args[] = {&dx, &dp, &count};
    run.launch(run.function(*programs[2]->find_kernel("block_sum<float, 256>")), blocks, 256, args);
    run.download(partial, dp);
    int bad = 0;
    for (int b = 0; b < blocks; ++b) {
      double want = 0;
      for (int i = 0; i < 256; ++i) want += x[static_cast<std::size_t>(b) * 256 + i];
      bad += std::fabs(partial[b] - want) > 1e-3 * (1 + std::fabs(want));
    }
    fmt::print("  block_sum<float,256> {} of {} partial sums wrong\n", bad, blocks);
    failures += bad != 0;
  }
  check(api.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "examples/kernels";
  try {
    fmt::print("jitbridge demo: NVRTC {}.{}, target {}\n\n", nvrtc_version().first, nvrtc_version().second,
               default_arch());
    std::vector<std::shared_ptr<const Program>> programs;
    for (const char* file : {"saxpy.cu", "scale_half.cu", "block_sum.cu"})
      programs.push_back(compile_example(dir, file));
    std::string why;
    const DriverApi* api = try_driver(&why);
    int devices = 0;
    if (api && api->cuDeviceGetCount(&devices) == CUDA_SUCCESS && devices > 0) {
      int failures = run_on_gpu(*api, programs);
      fmt::print(failures ? "\nFAILED: {} kernel(s) computed wrong results\n" : "\nAll kernels ran and were checked.\n",
                 failures);
      return failures ? 1 : 0;
    }
    fmt::print("\nNot running the kernels: {}\n", api ? "the CUDA driver sees no GPU" : why);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "jitbridge demo: {}\n", e.what());
    return 1;
  }
}
