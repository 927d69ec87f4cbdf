// jitbridge/launcher.hpp — launch configuration, its checks against the device, and the launch itself.
#pragma once

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

#include "jitbridge/arguments.hpp"
#include "jitbridge/module.hpp"

namespace jitbridge {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  unsigned long long count() const { return 1ull * x * y * z; }
};

// The legacy default stream, where launches go when nothing names another (docs/DESIGN.md).
inline CUstream legacy_stream() { return CU_STREAM_LEGACY; }

struct LaunchConfig {
  Dim3 grid, block;
  std::size_t shared_mem = 0;         // dynamic shared memory per block, bytes
  CUstream stream = CU_STREAM_LEGACY;
  Dim3 cluster{0, 0, 0};              // thread-block cluster dims; x == 0: no cluster
  bool cooperative = false;
  bool programmatic_dependent = false;  // PDL: may start before the previous kernel on the stream ends
};

// A launch configuration the device or kernel cannot run. what() names the limit and the value.
class LaunchConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A launch failed, or an earlier kernel faulted and the driver reported it now. what() names
// the kernel being launched and, for a fault, the kernel launched last on that device.
class LaunchError : public std::runtime_error {
 public:
  LaunchError(const std::string& message, CUresult code) : std::runtime_error(message), code_(code) {}
  CUresult code() const noexcept { return code_; }

 private:
  CUresult code_;
};

// Checks `config` against `device`'s limits and the kernel's own (launch bounds, static shared
// memory); raises the kernel's dynamic shared memory limit when more than 48 KiB is asked and
// the device allows it. Throws LaunchConfigError.
void validate_launch(const Function& function, const LaunchConfig& config, const Device& device);

// Whether two configurations are the same but for the stream: validate_launch judges them alike. (Inline: every
// launch's memo asks it.) Compared as the two runs of fields around the stream, grid, block and shared_mem before it,
// cluster and the flags after it, which hold no padding (asserted): a few word compares, no branch per field.
inline bool same_shape(const LaunchConfig& a, const LaunchConfig& b) noexcept {
  constexpr std::size_t head = offsetof(LaunchConfig, stream), tail_at = offsetof(LaunchConfig, cluster),
                        tail = offsetof(LaunchConfig, programmatic_dependent) + sizeof(bool) - tail_at;
  // The two runs must be every field but the stream, with no padding inside them (padding bytes are unset, so equal
  // configurations could differ there). The assert catches a field inserted into a run or a changed type; the binding
  // names every field of LaunchConfig, so a field appended after programmatic_dependent (which can sit in the tail
  // padding and move neither an offset nor sizeof) fails to compile here until the runs and this list include it.
  static_assert(head == 2 * sizeof(Dim3) + sizeof(std::size_t) && tail == sizeof(Dim3) + 2 * sizeof(bool),
                "same_shape: LaunchConfig's fields around the stream must hold no padding");
  [[maybe_unused]] const auto& [grid, block, shared_mem, stream, cluster, cooperative, programmatic_dependent] = a;
  const auto* x = reinterpret_cast<const unsigned char*>(&a);
  const auto* y = reinterpret_cast<const unsigned char*>(&b);
  return std::memcmp(x, y, head) == 0 && std::memcmp(x + tail_at, y + tail_at, tail) == 0;
}

namespace launch_detail {
// The calling thread's last configuration that passed validate_launch, and for what (validate_launch_memo's).
struct ValidatedMemo {
  std::uint64_t function = 0;  // Function::serial(); 0: none yet
  const Device* device = nullptr;
  LaunchConfig config;         // the shape only (its stream is CU_STREAM_LEGACY): no stream handle is kept
};
inline thread_local ValidatedMemo t_validated;
// validate_launch_memo's miss: validates, then remembers. Throws LaunchConfigError.
void validate_and_remember(const Function& function, const LaunchConfig& config, const Device& device);
}  // namespace launch_detail

// validate_launch, skipped when the calling thread's last call here validated the same shape (same_shape) for the
// same Function (by serial(): a new Function at a freed one's address is not taken for it) on the same device. Only
// a configuration that passed is remembered. Inline: a repeat costs a few compares and no call. Throws
// LaunchConfigError.
inline void validate_launch_memo(const Function& function, const LaunchConfig& config, const Device& device) {
  const launch_detail::ValidatedMemo& memo = launch_detail::t_validated;
  if (memo.function == function.serial() && memo.device == &device && same_shape(memo.config, config)) return;
  launch_detail::validate_and_remember(function, config, device);
}

// A kernel's parameters as one buffer laid out as its parameter space: each parameter at the
// offset cuKernelGetParamInfo reports (Function checks param_offsets() against it), `size` the
// end of the last. With `offsets` (each parameter's, `count` of them: the layout's, ParamLayout::offsets)
// the launch passes the driver one pointer per parameter into `data` (its kernelParams form, measured
// cheaper per launch than the buffer form); without them, or past kMaxParamPointers parameters, the
// buffer itself (CU_LAUNCH_PARAM_BUFFER_POINTER). Borrowed: read during the launch call only.
struct ParamBytes {
  const void* data = nullptr;
  std::size_t size = 0;                  // 0: the kernel takes no parameters
  const std::size_t* offsets = nullptr;  // nullptr: not known (the buffer form)
  std::size_t count = 0;                 // parameters in `offsets`
};

// The most parameters a ParamBytes launch passes as kernelParams (an array on the launch's stack); a kernel with
// more takes the buffer form, the same bytes.
inline constexpr std::size_t kMaxParamPointers = 32;

// Launches `function` on `config.stream`, in `device`'s primary context (pushed for the call when
// another context, or none, is current, and popped after: the thread's current device is
// unchanged). Asynchronous: never synchronizes the host. Throws LaunchError. validate_launch must
// have passed for this (function, config, device). The parameters come as the driver's array of
// pointers (`params`), as one buffer (`bytes`: kernelParams into it when its offsets are given, see
// ParamBytes), or as an ArgBuffer (its pointers(), which point into its parameter space when
// param_space()). All are read during the call only.
void launch(const Function& function, const LaunchConfig& config, const Device& device, void** params);
void launch(const Function& function, const LaunchConfig& config, const Device& device, const ParamBytes& bytes);
void launch(const Function& function, const LaunchConfig& config, const Device& device, ArgBuffer& packed);

// The kernel launched last on device `ordinal` (for fault reports); "" if none.
const char* last_launched_kernel(int ordinal);

}  // namespace jitbridge
