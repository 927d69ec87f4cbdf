// jitbridge/kernel_plan.hpp — one kernel's launch plan, shared by every way of launching it (the Python call, the C
// interface): its names, its signature's packing plans and parameter-space size, and its Function on each device.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "jitbridge/arguments.hpp"
#include "jitbridge/module_set.hpp"
#include "jitbridge/param_acceptors.hpp"

namespace jitbridge {

// The kernel resolved on one device: its Function there and the device. Made once per device by KernelPlan and
// kept until the plan dies (the C interface hands it out as a jitbridge_function).
class KernelPlan;
struct ResolvedKernel {
  std::shared_ptr<Function> function;
  const Device* device = nullptr;
  const KernelPlan* plan = nullptr;  // the plan that made it (it lives as long as the plan)
};

// Made once per kernel; needs no GPU. Immutable but for the per-device table, which is thread-safe. Keeps `modules`
// (and so the program that `info` points into) alive.
class KernelPlan {
 public:
  // Devices a plan resolves on: ordinals 0 to kMaxDevices - 1 (as Function's per-device tables).
  static constexpr int kMaxDevices = 64;
  // `modules`' kernel `lookup_name` (its lowered name; the name for images), shown as `name` in messages; `info`
  // (null for images) must point into `modules`' program.
  KernelPlan(std::shared_ptr<const ModuleSet> modules, std::string name, std::string lookup_name, const Kernel* info);
  ~KernelPlan();
  KernelPlan(const KernelPlan&) = delete;
  KernelPlan& operator=(const KernelPlan&) = delete;

  const std::string& name() const { return name_; }
  const std::string& lookup_name() const { return lookup_name_; }
  const Kernel* info() const { return info_; }
  const Signature* signature() const { return info_ && info_->signature ? &*info_->signature : nullptr; }
  const std::shared_ptr<const ModuleSet>& modules() const { return modules_; }
  // The signature's packing plan; check_args false: its unchecked_plan. Empty without a signature.
  const std::vector<ParamPlan>& plan(bool check_args = true) const { return check_args ? plan_ : plan_unchecked_; }
  // The signature's parameter layout (param_layout); nullptr without a signature or past kMaxParamBytes.
  const ParamLayout* layout() const { return layout_ ? &*layout_ : nullptr; }
  // The parameters as the launch fast path takes them (fast_params of plan(check_args)); empty without a signature.
  const std::vector<FastParam>& fast(bool check_args = true) const { return check_args ? fast_ : fast_unchecked_; }

  // Packs values[0..n) (`stride` bytes apart) with this plan (pack_values): against the signature, or, for a kernel
  // without one, as the driver's parameter sizes, read from the Function on `device` (nullptr: the current device;
  // resolved on first use).
  // Returns the arrays' device (-1: none). Throws ArgumentError, and what resolved() throws.
  int pack(const ArgValue* values, std::size_t stride, std::size_t n, ArgBuffer& out, bool check_args,
           const Device* device = nullptr) const;

  // The kernel on `device`: its module loaded there on first use (compiled for the device's architecture where the
  // program's target was left to the default); later calls are one atomic load. Throws std::invalid_argument
  // ("name: why") when the program's explicit target cannot run there, std::invalid_argument for an ordinal past
  // kMaxDevices, and what ModuleSet::module_for throws. Thread-safe.
  const ResolvedKernel& resolved(const Device& device) const;
  // The kernel on device `ordinal` if resolved there already, else nullptr (never loads). Lock-free.
  const ResolvedKernel* resolved_on(int ordinal) const noexcept;
  // Makes `function` the kernel on `device` (tests forcing a module of another architecture). The entry it replaces
  // stays valid until the plan dies. Thread-safe.
  void rebind(const Device& device, std::shared_ptr<Function> function) const;

 private:
  std::shared_ptr<const ModuleSet> modules_;
  std::string name_, lookup_name_;
  const Kernel* info_;
  std::vector<ParamPlan> plan_, plan_unchecked_;
  std::vector<FastParam> fast_, fast_unchecked_;
  std::optional<ParamLayout> layout_;  // param_layout of the signature
  mutable std::array<std::atomic<ResolvedKernel*>, kMaxDevices> resolved_{};  // set once per device
  mutable std::vector<std::unique_ptr<ResolvedKernel>> entries_;  // owns every entry ever made; guarded by mutex_
  mutable std::mutex mutex_;  // serialises resolving
};

}  // namespace jitbridge
