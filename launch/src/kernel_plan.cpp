// kernel_plan.cpp — KernelPlan (kernel_plan.hpp): a kernel's packing plans, made once, and its per-device Functions.
#include "jitbridge/kernel_plan.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "jitbridge/pack_values.hpp"
#include "jitbridge/streams.hpp"

namespace jitbridge {

KernelPlan::KernelPlan(std::shared_ptr<const ModuleSet> modules, std::string name, std::string lookup_name,
                       const Kernel* info)
    : modules_(std::move(modules)), name_(std::move(name)), lookup_name_(std::move(lookup_name)), info_(info) {
  if (const Signature* sig = signature()) {
    plan_ = plan_signature(*sig);
    plan_unchecked_ = unchecked_plan(plan_);
    layout_ = param_layout(*sig);
    if (layout_) {
      fast_ = fast_params(*sig, plan_, *layout_);
      fast_unchecked_ = fast_params(*sig, plan_unchecked_, *layout_);
    }
  }
}

KernelPlan::~KernelPlan() = default;

int KernelPlan::pack(const ArgValue* values, std::size_t stride, std::size_t n, ArgBuffer& out, bool check_args,
                     const Device* device) const {
  const Signature* sig = signature();
  const std::vector<std::size_t>* sizes = nullptr;
  if (!sig) sizes = &resolved(device ? *device : Device::get(current_device())).function->param_sizes();
  return pack_values(name_, sig, plan(check_args), layout_ ? &*layout_ : nullptr, sizes, values, stride, n, out);
}

const ResolvedKernel* KernelPlan::resolved_on(int ordinal) const noexcept {
  if (ordinal < 0 || ordinal >= kMaxDevices) return nullptr;
  return resolved_[static_cast<std::size_t>(ordinal)].load(std::memory_order_acquire);
}

const ResolvedKernel& KernelPlan::resolved(const Device& device) const {
  if (const ResolvedKernel* r = resolved_on(device.ordinal())) return *r;
  if (device.ordinal() < 0 || device.ordinal() >= kMaxDevices)
    throw std::invalid_argument(fmt::format("{}: device {} is out of range (0 to {})", name_, device.ordinal(),
                                            kMaxDevices - 1));
  std::lock_guard<std::mutex> lock(mutex_);
  std::atomic<ResolvedKernel*>& slot = resolved_[static_cast<std::size_t>(device.ordinal())];
  if (const ResolvedKernel* r = slot.load(std::memory_order_acquire)) return *r;
  auto entry = std::make_unique<ResolvedKernel>();
  try {
    entry->function = modules_->module_for(device).function(lookup_name_);
  } catch (const std::invalid_argument& e) {  // an explicit arch that cannot run on this device
    throw std::invalid_argument(fmt::format("{}: {}", name_, e.what()));
  }
  entry->device = &device;
  entry->plan = this;
  entries_.push_back(std::move(entry));
  slot.store(entries_.back().get(), std::memory_order_release);
  return *entries_.back();
}

void KernelPlan::rebind(const Device& device, std::shared_ptr<Function> function) const {
  if (device.ordinal() < 0 || device.ordinal() >= kMaxDevices)
    throw std::invalid_argument(fmt::format("{}: device {} is out of range", name_, device.ordinal()));
  std::lock_guard<std::mutex> lock(mutex_);
  auto entry = std::make_unique<ResolvedKernel>();
  entry->function = std::move(function);
  entry->device = &device;
  entry->plan = this;
  entries_.push_back(std::move(entry));
  resolved_[static_cast<std::size_t>(device.ordinal())].store(entries_.back().get(), std::memory_order_release);
}

}  // namespace jitbridge
