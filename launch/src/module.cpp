// module.cpp — loading binaries with cuLibraryLoadData and looking up kernels and globals.
#include "jitbridge/module.hpp"

#include "jitbridge/link.hpp"

#include <fmt/format.h>

#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>

namespace jitbridge {
namespace {

const char* intern(const std::string& name) {
  static std::mutex mutex;
  static auto* names = new std::set<std::string>();  // never freed: names outlive every module
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(name).first->c_str();
}

}  // namespace

std::shared_ptr<Module> Module::from_program(std::shared_ptr<const Program> program) {
  std::shared_ptr<Module> m(new Module());
  m->program_ = std::move(program);
  if (!m->program_->link_input.empty() && !m->program_->linked)
    throw std::invalid_argument(
        "the program was compiled for separate compilation (-rdc=true, -dc or -dlto) and is not linked: it "
        "references symbols defined in other code (its log names them); link it with them first "
        "(jitbridge.link / jitbridge::link)");
  const Program& p = *m->program_;
  m->image_ = !p.fatbin.empty() ? p.fatbin : p.cubin.empty() ? p.ptx : p.cubin;
  if (is_relocatable_cubin(m->image_))
    throw std::invalid_argument(
        "the cubin is relocatable (compiled with -rdc=true or -dc) and not linked; the driver cannot load it: "
        "link it first (jitbridge.link / jitbridge::link)");
  if (m->image_.empty()) throw std::invalid_argument("the program has neither a cubin nor PTX to load");
  check(driver().cuLibraryLoadData(&m->library_, m->image_.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "cuLibraryLoadData");
  return m;
}

std::shared_ptr<Module> Module::from_image(std::string image) {
  std::shared_ptr<Module> m(new Module());
  m->image_ = std::move(image);
  if (m->image_.empty()) throw std::invalid_argument("the image is empty");
  // PTX must be NUL-terminated text; cubin and fatbin are read by their headers.
  if (is_relocatable_cubin(m->image_))
    throw std::invalid_argument(
        "the image is a relocatable cubin (compiled with -rdc=true or -dc) and not linked; the driver cannot load "
        "it: link it first (jitbridge.link / jitbridge::link)");
  if (m->image_.back() != '\0') m->image_.push_back('\0');
  check(driver().cuLibraryLoadData(&m->library_, m->image_.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "cuLibraryLoadData");
  return m;
}

Module::~Module() {
  if (library_) {
    if (const DriverApi* api = try_driver()) api->cuLibraryUnload(library_);
  }
}

std::vector<std::string> Module::kernel_names() const {
  std::vector<std::string> out;
  if (program_) {
    for (const Kernel& k : program_->kernels) out.push_back(k.name);
    return out;
  }
  const DriverApi& api = driver();
  unsigned count = 0;
  if (!api.cuLibraryGetKernelCount || api.cuLibraryGetKernelCount(&count, library_) != CUDA_SUCCESS) return out;
  std::vector<CUkernel> kernels(count);
  if (api.cuLibraryEnumerateKernels(kernels.data(), count, library_) != CUDA_SUCCESS) return out;
  for (CUkernel k : kernels) {
    const char* name = nullptr;
    if (api.cuKernelGetName(&name, k) == CUDA_SUCCESS && name) out.emplace_back(name);
  }
  return out;
}

std::shared_ptr<Function> Module::function(std::string_view name) const {
  const Kernel* info = nullptr;
  std::string symbol(name);
  if (program_) {
    info = program_->find_kernel(name);
    if (!info) throw std::out_of_range(program_->missing_kernel_message(name));
    symbol = info->lowered_name;
  }
  CUkernel kernel = nullptr;
  CUresult rc = driver().cuLibraryGetKernel(&kernel, library_, symbol.c_str());
  if (rc == CUDA_ERROR_NOT_FOUND || rc == CUDA_ERROR_INVALID_VALUE) {
    std::string names;
    for (const std::string& n : kernel_names()) names += (names.empty() ? "" : ", ") + n;
    throw std::out_of_range(fmt::format("no kernel '{}' in this module; it has: {}",
                                        name.size() <= 200 ? std::string(name) : std::string(name.substr(0, 200)) + "[...]",
                                        names.empty() ? "none" : names));
  }
  check(rc, "cuLibraryGetKernel");
  return std::make_shared<Function>(shared_from_this(), kernel, info ? info->name : symbol, info);
}

std::pair<CUdeviceptr, std::size_t> Module::global(std::string_view name, const Device& device) const {
  std::string symbol(name);
  if (program_) {
    for (const auto& [expr, lowered] : program_->lowered_names)
      if (expr == name && !lowered.empty()) symbol = lowered;
  }
  ContextGuard guard(device);
  CUdeviceptr ptr = 0;
  std::size_t size = 0;
  CUresult rc = driver().cuLibraryGetGlobal(&ptr, &size, library_, symbol.c_str());
  if (rc == CUDA_ERROR_NOT_FOUND || rc == CUDA_ERROR_INVALID_VALUE)
    throw std::out_of_range(fmt::format("no __device__ or __constant__ variable '{}' in this module",
                                        name.size() <= 200 ? std::string(name) : std::string(name.substr(0, 200)) + "[...]"));
  check(rc, "cuLibraryGetGlobal");
  return {ptr, size};
}

namespace {
std::uint64_t next_serial() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

Function::Function(std::shared_ptr<const Module> module, CUkernel kernel, std::string name, const Kernel* info)
    : module_(std::move(module)), kernel_(kernel), name_(std::move(name)), interned_(intern(name_)),
      serial_(next_serial()), info_(info) {
  if (!info_ || !info_->signature) return;
  const Signature& sig = *info_->signature;
  plan_ = plan_signature(sig);
  plan_unchecked_ = unchecked_plan(plan_);
  layout_ = jitbridge::param_layout(sig);
  if (layout_) fast_ = fast_params(sig, plan_, *layout_);
  if (!driver().cuKernelGetParamInfo) return;
  const std::vector<std::size_t> offsets = jitbridge::param_offsets(sig);
  const std::vector<std::size_t>& sizes = param_sizes();
  const std::vector<std::size_t>& driver_offsets = param_offsets();
  auto differ = [&](const std::string& what) {
    return std::logic_error(fmt::format("{}{}: {}; launches would pass wrong bytes, so none is made (please report "
                                        "this jitbridge bug with the kernel's source)",
                                        name_, sig.to_string(), what));
  };
  if (sizes.size() != sig.params.size())
    throw differ(fmt::format("the signature has {} parameters, the driver says {}", sig.params.size(), sizes.size()));
  for (std::size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] != sig.params[i].size || driver_offsets[i] != offsets[i])
      throw differ(fmt::format("parameter {} ({}) is {} bytes at offset {} by the signature, {} bytes at offset {} by "
                               "the driver", i, sig.params[i].spelling, sig.params[i].size, offsets[i], sizes[i],
                               driver_offsets[i]));
}

int Function::attribute(CUfunction_attribute attribute, const Device& device) const {
  int value = 0;
  check(driver().cuKernelGetAttribute(&value, attribute, kernel_, device.handle()), "cuKernelGetAttribute");
  return value;
}

void Function::query_params() const {
  if (params_known_) return;
  const DriverApi& api = driver();
  if (!api.cuKernelGetParamInfo)
    throw std::runtime_error("this CUDA driver cannot describe kernel parameters (cuKernelGetParamInfo); "
                             "compile from source to get checked launches");
  // The query needs a current context (any: a CUkernel's parameters are the same in each); a
  // Function may be made before any launch made one current.
  CUcontext current = nullptr;
  std::optional<ContextGuard> guard;
  if (api.cuCtxGetCurrent(&current) != CUDA_SUCCESS || !current) guard.emplace(Device::get(0));
  std::vector<std::size_t> sizes, offsets;
  for (std::size_t i = 0;; ++i) {
    std::size_t offset = 0, size = 0;
    CUresult rc = api.cuKernelGetParamInfo(kernel_, i, &offset, &size);
    if (rc == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
    check(rc, "cuKernelGetParamInfo");
    sizes.push_back(size);
    offsets.push_back(offset);
  }
  param_sizes_ = std::move(sizes);
  param_offsets_ = std::move(offsets);
  params_known_ = true;
}

const std::vector<std::size_t>& Function::param_sizes() const {
  query_params();
  return param_sizes_;
}

const std::vector<std::size_t>& Function::param_offsets() const {
  query_params();
  return param_offsets_;
}

const Function::Limits& Function::limits(const Device& device) const {
  auto& slot = limits_[static_cast<std::size_t>(device.ordinal()) % limits_.size()];
  if (const Limits* l = slot.load(std::memory_order_acquire)) return *l;
  std::lock_guard<std::mutex> lock(limits_mutex_);
  if (const Limits* l = slot.load(std::memory_order_acquire)) return *l;
  auto l = std::make_unique<Limits>();
  l->max_threads_per_block = attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
  l->static_shared = static_cast<std::size_t>(attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, device));
  slot.store(l.get(), std::memory_order_release);
  limits_storage_.push_back(std::move(l));
  return *limits_storage_.back();
}

CUfunction Function::load_function(const Device& device) const {
  auto& slot = functions_[static_cast<std::size_t>(device.ordinal()) % functions_.size()];
  if (CUfunction f = slot.load(std::memory_order_acquire)) return f;  // another thread's
  CUfunction f = nullptr;
  check(driver().cuKernelGetFunction(&f, kernel_), "cuKernelGetFunction");
  slot.store(f, std::memory_order_release);
  return f;
}

void Function::allow_dynamic_shared(std::size_t bytes, const Device& device) const {
  auto& allowed = shared_allowed_[static_cast<std::size_t>(device.ordinal()) % shared_allowed_.size()];
  if (bytes <= allowed.load(std::memory_order_relaxed)) return;
  check(driver().cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes),
                                      kernel_, device.handle()),
        "cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  allowed.store(bytes, std::memory_order_relaxed);
}

}  // namespace jitbridge
