// jitbridge/module_set.hpp — a program's modules, one per target, built on first use per device architecture.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "jitbridge/module.hpp"

namespace jitbridge {

class Cache;

// What a RawKernel or RawModule loads from. A program whose target was left to the default
// (Program::request->arch_given false) runs everywhere: a device whose architecture differs from
// the program's gets the request compiled again for its own ("sm_XY", through the cache), once.
// Every such build must give the kernels the same signatures. A program with an explicit target,
// a fat binary or an image serves only the devices its code runs on (docs/DESIGN.md, "Modules").
class ModuleSet {
 public:
  // `cache`: where other architectures' builds are looked up (nullptr: Cache::global()); must
  // outlive the set. Loads nothing yet.
  explicit ModuleSet(std::shared_ptr<const Program> program, Cache* cache = nullptr);
  // A .cubin, .fatbin or .ptx image (the driver judges which devices it runs on). Loads nothing yet.
  explicit ModuleSet(std::string image);

  const std::shared_ptr<const Program>& program() const { return program_; }  // nullptr for images

  // The module whose code runs on `device`, loaded (and compiled for the device's architecture)
  // on first use. Throws std::invalid_argument with the rule (targets.hpp why_not) when an
  // explicit target cannot run there; CompileError/NvrtcError from the compile; std::runtime_error
  // when that build's kernels or signatures differ from the program's; NoDriverError, DriverError.
  // Thread-safe; compiles and loads with an internal mutex held.
  const Module& module_for(const Device& device) const;
  // The module built for `target` ("sm_90a", "compute_90"), compiled from the request unless it is
  // the program's own target; for tests (forcing a second architecture) and tools. Throws as
  // module_for, and std::logic_error for an image or a program without a request. Thread-safe.
  const Module& module_for_target(const std::string& target) const;
  // The targets whose modules are loaded, in the order they were built ("image" for an image).
  std::vector<std::string> targets() const;

 private:
  const Module& load(const std::string& target, const std::shared_ptr<const Program>& program) const;  // mutex held
  const Module& build(const std::string& target) const;                                                 // mutex held

  std::shared_ptr<const Program> program_;
  std::string image_;
  Cache* cache_ = nullptr;
  mutable std::mutex mutex_;
  mutable std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules_;  // by target, guarded by mutex_
};

}  // namespace jitbridge
