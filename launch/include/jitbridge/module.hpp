// jitbridge/module.hpp — loaded binaries and kernel handles: a Module keeps its Program alive, a
// Function keeps its Module alive, so no handle can outlive what it points into.
#pragma once

#include <optional>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "jitbridge/arguments.hpp"
#include "jitbridge/device.hpp"
#include "jitbridge/jit.hpp"
#include "jitbridge/param_acceptors.hpp"

namespace jitbridge {

class Function;

// One loaded binary. It is context-independent (cuLibraryLoadData): the same Module serves
// every device the binary can run on; the driver loads it into a device at first use there.
class Module : public std::enable_shared_from_this<Module> {
 public:
  // Loads `program`'s fatbin, else its cubin, else its PTX. Throws NoDriverError, DriverError.
  static std::shared_ptr<Module> from_program(std::shared_ptr<const Program> program);
  // Loads a .cubin, .fatbin or .ptx image (kernels without signatures: unchecked packing).
  static std::shared_ptr<Module> from_image(std::string image);
  ~Module();  // cuLibraryUnload; never throws
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const Program* program() const { return program_.get(); }  // nullptr for images
  CUlibrary library() const { return library_; }
  // The kernel called `name` (its Kernel::name or lowered name). Throws std::out_of_range
  // naming the kernels the module has.
  std::shared_ptr<Function> function(std::string_view name) const;
  std::vector<std::string> kernel_names() const;
  // A __device__ or __constant__ variable's address and size on `device`. Throws
  // std::out_of_range when there is no such variable.
  std::pair<CUdeviceptr, std::size_t> global(std::string_view name, const Device& device) const;

 private:
  Module() = default;
  std::shared_ptr<const Program> program_;
  std::string image_;  // the bytes the library was loaded from (kept: some drivers read lazily)
  CUlibrary library_ = nullptr;
};

// A kernel in a loaded Module.
class Function {
 public:
  // With a signature (`info`), checks it against the driver's view of the parameters (count, each
  // size and offset, when the driver has cuKernelGetParamInfo): a difference would make every
  // launch pass wrong bytes, so it throws std::logic_error naming the parameter.
  Function(std::shared_ptr<const Module> module, CUkernel kernel, std::string name, const Kernel* info);
  const std::string& name() const { return name_; }
  const char* interned_name() const { return interned_; }  // lives for the whole process
  // Unique per Function made in this process (never reused, unlike an address): what memos key a Function by.
  std::uint64_t serial() const { return serial_; }
  CUkernel handle() const { return kernel_; }
  const Kernel* info() const { return info_; }  // signature and resources; nullptr for images
  // Packing plan of the signature; check_args false: its unchecked_plan (as check_args=False).
  const std::vector<ParamPlan>& plan(bool check_args = true) const { return check_args ? plan_ : plan_unchecked_; }
  // The signature's parameter layout (param_layout, worked out once); nullptr without a signature or past the limit.
  const ParamLayout* param_layout() const { return layout_ ? &*layout_ : nullptr; }
  // The parameters as the typed launch's fast path takes them (fast_params of plan()); empty without a layout.
  const std::vector<FastParam>& fast() const { return fast_; }
  const Module& module() const { return *module_; }
  // cuKernelGetAttribute on `device`.
  int attribute(CUfunction_attribute attribute, const Device& device) const;
  // Parameter sizes from the driver (cuKernelGetParamInfo), for kernels without a signature.
  const std::vector<std::size_t>& param_sizes() const;
  // Parameter offsets from the driver, in the same order.
  const std::vector<std::size_t>& param_offsets() const;
  // The kernel's own limits on `device` (launch bounds, static shared memory), queried once.
  struct Limits {
    int max_threads_per_block = 0;
    std::size_t static_shared = 0;
  };
  const Limits& limits(const Device& device) const;
  // The kernel as a CUfunction of `device`'s primary context (cuKernelGetFunction, once per device;
  // launching it skips the per-launch CUkernel lookup). The context must be current.
  CUfunction function_for(const Device& device) const {  // inline: every launch asks
    if (CUfunction f = functions_[static_cast<std::size_t>(device.ordinal()) % functions_.size()].load(
            std::memory_order_acquire))
      return f;
    return load_function(device);
  }
  // Raises the kernel's dynamic shared memory limit on `device` to `bytes` if it is lower
  // (once per value). Throws DriverError.
  void allow_dynamic_shared(std::size_t bytes, const Device& device) const;

 private:
  std::shared_ptr<const Module> module_;
  CUkernel kernel_;
  std::string name_;
  const char* interned_;
  std::uint64_t serial_;
  const Kernel* info_;
  std::vector<ParamPlan> plan_, plan_unchecked_;
  std::optional<ParamLayout> layout_;
  std::vector<FastParam> fast_;
  void query_params() const;
  CUfunction load_function(const Device& device) const;  // function_for's first call per device
  mutable std::vector<std::size_t> param_sizes_, param_offsets_;
  mutable bool params_known_ = false;
  mutable std::array<std::atomic<std::size_t>, 64> shared_allowed_{};  // per device ordinal
  mutable std::array<std::atomic<const Limits*>, 64> limits_{};        // per device ordinal, never freed
  mutable std::array<std::atomic<CUfunction>, 64> functions_{};        // per device ordinal
  mutable std::vector<std::unique_ptr<Limits>> limits_storage_;
  mutable std::mutex limits_mutex_;
};

}  // namespace jitbridge
