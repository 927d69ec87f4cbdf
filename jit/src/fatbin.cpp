// fatbin.cpp — compile_fatbin(): a program built for several targets and joined into one fat binary by nvFatbin (dlopen'ed).
#include "jitbridge/fatbin.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <stdexcept>

#include "jit_internal.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/targets.hpp"

namespace jitbridge {
namespace {

// The nvFatbin 13 C entry points jitbridge uses (nvFatbin.h, declared here: the toolkit may lack the header).
using FatbinHandle = struct FatbinOpaque*;
struct NvFatbinApi {
  int (*create)(FatbinHandle*, const char**, std::size_t) = nullptr;
  int (*destroy)(FatbinHandle*) = nullptr;
  int (*add_ptx)(FatbinHandle, const char*, std::size_t, const char*, const char*, const char*) = nullptr;
  int (*add_cubin)(FatbinHandle, const void*, std::size_t, const char*, const char*) = nullptr;
  int (*size)(FatbinHandle, std::size_t*) = nullptr;
  int (*get)(FatbinHandle, void*) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

const NvFatbinApi& nvfatbin_api() {
  static const NvFatbinApi api = [] {
    void* handle = detail::nvfatbin_library();  // throws CudaNotFoundError
    NvFatbinApi a;
    std::string missing;
    auto load = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    load(a.create, "nvFatbinCreate");
    load(a.destroy, "nvFatbinDestroy");
    load(a.add_ptx, "nvFatbinAddPTX");
    load(a.add_cubin, "nvFatbinAddCubin");
    load(a.size, "nvFatbinSize");
    load(a.get, "nvFatbinGet");
    load(a.error_string, "nvFatbinGetErrorString");
    if (!missing.empty())
      throw CudaNotFoundError(fmt::format("nvFatbin at {} lacks {}: pip install nvidia-nvfatbin (CUDA 13)",
                                          nvfatbin_pick().path, missing));
    return a;
  }();
  return api;
}

// Owns one nvFatbin handle; every call's result is checked.
class Fatbin {
 public:
  Fatbin() : api_(nvfatbin_api()) {
    const char* options[] = {"-64", "-cuda", "-host=linux"};
    check(api_.create(&handle_, options, 3), "nvFatbinCreate");
  }
  ~Fatbin() {
    if (handle_) api_.destroy(&handle_);
  }
  Fatbin(const Fatbin&) = delete;
  Fatbin& operator=(const Fatbin&) = delete;

  void add(const Program& p, const Target& t, const std::string& program_name) {
    const std::string arch = fmt::format("{}{}{}", t.major, t.minor,
                                         t.variant == Target::Variant::arch_specific ? "a"
                                         : t.variant == Target::Variant::family      ? "f"
                                                                                     : "");
    const std::string what = fmt::format("nvFatbin: adding the {} image", t.name());
    if (t.kind == Target::Kind::ptx) check(api_.add_ptx(handle_, p.ptx.c_str(), p.ptx.size() + 1, arch.c_str(),
                                                        program_name.c_str(), ""), what.c_str());
    else check(api_.add_cubin(handle_, p.cubin.data(), p.cubin.size(), arch.c_str(), program_name.c_str()), what.c_str());
  }

  std::string bytes() {
    std::size_t n = 0;
    check(api_.size(handle_, &n), "nvFatbinSize");
    std::string out(n, '\0');
    check(api_.get(handle_, out.data()), "nvFatbinGet");
    return out;
  }

 private:
  void check(int rc, const char* what) const {
    if (rc == 0) return;
    const char* why = api_.error_string ? api_.error_string(rc) : nullptr;
    throw std::runtime_error(fmt::format("{} failed: {} ({})", what, why ? why : "unknown error", rc));
  }
  const NvFatbinApi& api_;
  FatbinHandle handle_ = nullptr;
};

}  // namespace

std::shared_ptr<const Program> compile_fatbin(std::string_view source, const CompileOptions& options,
                                              const std::vector<std::string>& targets, Cache* cache) {
  if (targets.empty()) throw std::invalid_argument("arch: the list of targets is empty");
  if (!options.arch.empty())
    throw std::invalid_argument("arch: give the targets of a fat binary as the list, not in CompileOptions::arch");
  std::vector<Target> parsed;
  for (const std::string& name : targets) {
    parsed.push_back(parse_target(name));
    for (std::size_t i = 0; i + 1 < parsed.size(); ++i)
      if (parsed[i].name() == parsed.back().name())
        throw std::invalid_argument(fmt::format("arch: '{}' is listed twice", name));
  }
  nvfatbin_api();  // before compiling: a missing nvFatbin is reported at once
  std::vector<std::shared_ptr<const Program>> built;
  Fatbin fatbin;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    CompileOptions o = options;
    o.arch = parsed[i].name();
    built.push_back(compile(source, o, cache));
    if (i > 0) {
      if (std::string diff = kernel_difference(*built[0], *built[i]); !diff.empty())
        throw std::runtime_error(fmt::format("arch: the {} build differs from the {} build: {}", o.arch,
                                             built[0]->arch, diff));
    }
    fatbin.add(*built[i], parsed[i], options.program_name);
  }
  auto program = std::make_shared<Program>(*built[0]);
  program->cubin.clear();
  program->ptx.clear();
  program->fatbin = fatbin.bytes();
  program->arch.clear();
  for (const Target& t : parsed) program->arch += (program->arch.empty() ? "" : ",") + t.name();
  auto request = std::make_shared<CompileRequest>(*built[0]->request);
  request->options.arch = program->arch;
  request->arch_given = true;
  program->request = std::move(request);
  return program;
}

}  // namespace jitbridge
