// launcher.cpp — checks a launch configuration against the device and launches through the driver.
#include "jitbridge/launcher.hpp"

#include <fmt/format.h>

#include <array>

namespace jitbridge {
namespace {

constexpr std::size_t kDefaultSharedLimit = 48 * 1024;
std::array<std::atomic<const char*>, 64> g_last_kernel{};

// The slot naming the kernel launched last on device `ordinal` (devices past 64 share slots).
std::atomic<const char*>& last_kernel_slot(int ordinal) {
  return g_last_kernel[static_cast<std::size_t>(ordinal) % g_last_kernel.size()];
}

[[noreturn]] void bad(const std::string& message) { throw LaunchConfigError(message); }

void check_dims(const char* what, const Dim3& d, const int limit[3], const Device& device) {
  const unsigned v[3] = {d.x, d.y, d.z};
  const char* axis[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    if (v[i] == 0) bad(fmt::format("{}: {} is 0; every dimension must be at least 1", what, axis[i]));
    if (v[i] > static_cast<unsigned>(limit[i]))
      bad(fmt::format("{}: {} = {} exceeds cuda:{}'s limit of {}", what, axis[i], v[i], device.ordinal(), limit[i]));
  }
}

bool is_fault(CUresult rc) {
  return rc == CUDA_ERROR_ILLEGAL_ADDRESS || rc == CUDA_ERROR_LAUNCH_FAILED || rc == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
         rc == CUDA_ERROR_MISALIGNED_ADDRESS || rc == CUDA_ERROR_INVALID_ADDRESS_SPACE || rc == CUDA_ERROR_INVALID_PC ||
         rc == CUDA_ERROR_HARDWARE_STACK_ERROR || rc == CUDA_ERROR_ASSERT || rc == CUDA_ERROR_LAUNCH_TIMEOUT;
}

}  // namespace

void launch_detail::validate_and_remember(const Function& function, const LaunchConfig& config, const Device& device) {
  validate_launch(function, config, device);
  ValidatedMemo& memo = t_validated;
  memo = {function.serial(), &device, config};
  memo.config.stream = CU_STREAM_LEGACY;  // the shape only: no stream handle is kept
}

const char* last_launched_kernel(int ordinal) {
  const char* name = last_kernel_slot(ordinal).load(std::memory_order_relaxed);
  return name ? name : "";
}

void validate_launch(const Function& function, const LaunchConfig& c, const Device& device) {
  const DeviceLimits& l = device.limits();
  check_dims("grid", c.grid, l.max_grid_dim, device);
  const unsigned long long threads = c.block.count();
  if (threads > static_cast<unsigned long long>(l.max_threads_per_block))
    bad(fmt::format("block: {} threads exceed cuda:{}'s limit of {} per block", threads, device.ordinal(),
                    l.max_threads_per_block));
  check_dims("block", c.block, l.max_block_dim, device);
  const Function::Limits& own = function.limits(device);  // __launch_bounds__, registers, static shared
  if (threads > static_cast<unsigned long long>(own.max_threads_per_block))
    bad(fmt::format("block: {} threads exceed {}'s limit of {} per block (its launch bounds and registers)", threads,
                    function.name(), own.max_threads_per_block));
  if (c.shared_mem > 0) {
    // Compared before adding: shared_mem near SIZE_MAX plus the static bytes used to wrap to a small total.
    const std::size_t limit = static_cast<std::size_t>(l.max_shared_per_block_optin);
    if (c.shared_mem > limit || own.static_shared > limit - c.shared_mem)
      bad(fmt::format("shared_mem: {} bytes (plus {} static) exceed cuda:{}'s limit of {} bytes per block", c.shared_mem,
                      own.static_shared, device.ordinal(), l.max_shared_per_block_optin));
    if (own.static_shared + c.shared_mem > kDefaultSharedLimit) function.allow_dynamic_shared(c.shared_mem, device);
  }
  if (c.cluster.x != 0) {
    if (!l.cluster_launch) bad(fmt::format("cluster: cuda:{} cannot launch thread-block clusters", device.ordinal()));
    const Dim3& k = c.cluster;
    if (k.x == 0 || k.y == 0 || k.z == 0)  // (x == 0 means no cluster; a 0 elsewhere used to divide by zero)
      bad(fmt::format("cluster: ({}, {}, {}) has a zero dimension", k.x, k.y, k.z));
    if (c.grid.x % k.x || c.grid.y % k.y || c.grid.z % k.z)
      bad(fmt::format("cluster: ({}, {}, {}) does not divide the grid ({}, {}, {})", k.x, k.y, k.z, c.grid.x, c.grid.y,
                      c.grid.z));
    if (k.count() > 16)
      bad(fmt::format("cluster: {} blocks exceed the largest cluster size (16 with non-portable sizes, 8 portable)", k.count()));
  }
  if (c.cooperative && !l.cooperative_launch)
    bad(fmt::format("cooperative: cuda:{} cannot launch cooperative kernels", device.ordinal()));
  if (c.cooperative) {
    // Every block of a cooperative grid must be resident at once: asked of the occupancy API with this block size
    // and dynamic shared memory, so the error names the numbers (the driver would only say "too large").
    int per_sm = 0;
    const ContextGuard context(device);
    if (driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, function.function_for(device),
                                                             static_cast<int>(threads), c.shared_mem) == CUDA_SUCCESS) {
      const unsigned long long most =
          static_cast<unsigned long long>(per_sm) * static_cast<unsigned long long>(l.multiprocessors);
      if (c.grid.count() > most)
        bad(fmt::format("cooperative: a grid of {} blocks cannot be resident at once on cuda:{}: {} fits {} blocks of "
                        "{} threads ({} bytes of dynamic shared memory) per multiprocessor x {} multiprocessors = {} "
                        "blocks at most; launch at most {} blocks (grid.sync() needs every block running)",
                        c.grid.count(), device.ordinal(), function.name(), per_sm, threads, c.shared_mem,
                        l.multiprocessors, most, most));
    }
  }
  if (c.programmatic_dependent && l.cc_major < 9)
    bad(fmt::format("programmatic_dependent: needs compute capability 9.0; cuda:{} has {}.{}", device.ordinal(),
                    l.cc_major, l.cc_minor));
}

namespace {

// What a launch that the driver refused with `rc` throws (out of line: the launch's own frame stays small).
[[noreturn, gnu::cold, gnu::noinline]] void launch_failed(const Function& function, const LaunchConfig& c,
                                                          const Device& device, CUresult rc) {
  const DriverApi& api = device.api();
  const char* name = nullptr;
  const char* text = nullptr;
  api.cuGetErrorName(rc, &name);
  api.cuGetErrorString(rc, &text);
  if (is_fault(rc)) {
    const char* previous = last_kernel_slot(device.ordinal()).load(std::memory_order_relaxed);
    throw LaunchError(fmt::format("launching {} on cuda:{}: an earlier kernel faulted ({}: {}); the kernel launched last "
                                  "there was '{}'. The device's context is now unusable: restart the process",
                                  function.name(), device.ordinal(), name ? name : "?", text ? text : "",
                                  previous ? previous : "unknown"),
                      rc);
  }
  if (rc == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
    throw LaunchError(fmt::format("launching {} on cuda:{}: a cooperative grid of {} blocks cannot be resident at once",
                                  function.name(), device.ordinal(), c.grid.count()),
                      rc);
  throw LaunchError(fmt::format("launching {} on cuda:{} failed: {} ({})", function.name(), device.ordinal(),
                                name ? name : "?", text ? text : ""),
                    rc);
}

// A launch with attributes (a cluster, cooperative, programmatic dependent): cuLaunchKernelEx. Out of line: the plain
// launch's frame holds no attribute array.
[[gnu::noinline]] CUresult launch_with_attributes(const DriverApi& api, CUfunction fn, const LaunchConfig& c,
                                                  void** params, void** extra) {
  CUlaunchAttribute attrs[3];
  unsigned n = 0;
  if (c.cluster.x != 0) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = c.cluster.x;
    attrs[n].value.clusterDim.y = c.cluster.y;
    attrs[n].value.clusterDim.z = c.cluster.z;
    ++n;
  }
  if (c.cooperative) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n].value.cooperative = 1;
    ++n;
  }
  if (c.programmatic_dependent) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  CUlaunchConfig cfg{};
  cfg.gridDimX = c.grid.x;
  cfg.gridDimY = c.grid.y;
  cfg.gridDimZ = c.grid.z;
  cfg.blockDimX = c.block.x;
  cfg.blockDimY = c.block.y;
  cfg.blockDimZ = c.block.z;
  cfg.sharedMemBytes = static_cast<unsigned>(c.shared_mem);
  cfg.hStream = c.stream;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  return api.cuLaunchKernelEx(&cfg, fn, params, extra);
}

// The launch itself: `params` or `extra` in cuLaunchKernel's sense (one of them null).
void launch_with(const Function& function, const LaunchConfig& c, const Device& device, void** params, void** extra) {
  const DriverApi& api = device.api();
  // The device's context for this call only: the caller's current device (torch's, CuPy's, the
  // runtime's: all read the driver's current context) is the same afterwards.
  const ContextGuard context(device);
  const CUfunction fn = function.function_for(device);
  const CUresult rc = c.cluster.x == 0 && !c.cooperative && !c.programmatic_dependent
                          ? api.cuLaunchKernel(fn, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z,
                                               static_cast<unsigned>(c.shared_mem), c.stream, params, extra)
                          : launch_with_attributes(api, fn, c, params, extra);
  if (rc != CUDA_SUCCESS) launch_failed(function, c, device, rc);
  last_kernel_slot(device.ordinal()).store(function.interned_name(), std::memory_order_relaxed);
}

}  // namespace

void launch(const Function& function, const LaunchConfig& config, const Device& device, void** params) {
  launch_with(function, config, device, params, nullptr);
}

void launch(const Function& function, const LaunchConfig& config, const Device& device, const ParamBytes& bytes) {
  if (bytes.size == 0) return launch_with(function, config, device, nullptr, nullptr);
  auto* space = static_cast<unsigned char*>(const_cast<void*>(bytes.data));
  if (bytes.offsets && bytes.count <= kMaxParamPointers) {
    // The driver's pointer form: parameter i at its offset in the space (the same bytes; the driver
    // reads each parameter's size from the kernel).
    void* params[kMaxParamPointers];
    const std::size_t count = bytes.count;  // locals: the stores into params cannot change them
    const std::size_t* offsets = bytes.offsets;
    for (std::size_t i = 0; i < count; ++i) params[i] = space + offsets[i];
    return launch_with(function, config, device, params, nullptr);
  }
  // The size is the parameter space's end (cuLaunchKernel's documented buffer form: the buffer
  // honours every parameter's offset and alignment).
  std::size_t size = bytes.size;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, space, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  launch_with(function, config, device, nullptr, extra);
}

void launch(const Function& function, const LaunchConfig& config, const Device& device, ArgBuffer& packed) {
  // Its pointers (filled by slot(), at each parameter's offset when param_space()), whatever the count: they live
  // in the buffer, not on the stack. No parameters: nullptr, as ParamBytes.
  launch_with(function, config, device, packed.count() ? packed.pointers() : nullptr, nullptr);
}

}  // namespace jitbridge
