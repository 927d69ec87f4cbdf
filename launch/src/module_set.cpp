// module_set.cpp — ModuleSet: which module serves a device (CUDA's compatibility rules), building one per architecture from the compile request.
#include "jitbridge/module_set.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "jitbridge/targets.hpp"

namespace jitbridge {
namespace {

std::vector<std::string> split_targets(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

ModuleSet::ModuleSet(std::shared_ptr<const Program> program, Cache* cache) : program_(std::move(program)), cache_(cache) {
  if (!program_) throw std::invalid_argument("ModuleSet: no program");
}

ModuleSet::ModuleSet(std::string image) : image_(std::move(image)) {
  if (image_.empty()) throw std::invalid_argument("the image is empty");
}

const Module& ModuleSet::load(const std::string& target, const std::shared_ptr<const Program>& program) const {
  for (const auto& [t, m] : modules_)
    if (t == target) return *m;
  std::shared_ptr<Module> m = program ? Module::from_program(program) : Module::from_image(image_);
  modules_.emplace_back(target, m);
  return *m;
}

const Module& ModuleSet::build(const std::string& target) const {
  for (const auto& [t, m] : modules_)
    if (t == target) return *m;
  if (target == program_->arch) return load(target, program_);
  if (!program_->request)
    throw std::logic_error(fmt::format("the program for {} was not made by compile(), so it cannot be built for {}",
                                       program_->arch, target));
  parse_target(target);  // a malformed target is an invalid_argument naming it
  CompileOptions options = program_->request->options;
  options.arch = target;
  std::shared_ptr<const Program> built = compile(program_->request->source, options, cache_);
  if (std::string diff = kernel_difference(*program_, *built); !diff.empty())
    throw std::runtime_error(fmt::format("compiled for {}, the program differs from its {} build: {}; make the "
                                         "kernels' parameters the same for every __CUDA_ARCH__, or pass arch=",
                                         target, program_->arch, diff));
  return load(target, built);
}

const Module& ModuleSet::module_for(const Device& device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!program_) return load("image", nullptr);
  const int major = device.limits().cc_major, minor = device.limits().cc_minor;
  const std::string where = fmt::format("cuda:{}", device.ordinal());
  const std::vector<std::string> built = split_targets(program_->arch);
  if (!program_->fatbin.empty() || !program_->request || program_->request->arch_given) {
    std::string why;
    for (const std::string& t : built) {
      const std::string w = why_not(parse_target(t), major, minor, where);
      if (w.empty()) return load(program_->arch, program_);
      why += (why.empty() ? "" : "; ") + w;
    }
    throw std::invalid_argument(fmt::format("arch='{}': {}; compile with arch=None (each device's own) or a target "
                                            "that runs there", program_->arch, why));
  }
  return build(native_target(major, minor));
}

const Module& ModuleSet::module_for_target(const std::string& target) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!program_) throw std::logic_error("a module loaded from an image has only its own target");
  return build(target);
}

std::vector<std::string> ModuleSet::targets() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [t, m] : modules_) out.push_back(t);
  return out;
}

}  // namespace jitbridge
