// cuda_libraries.cpp — this process's CUDA search: wheel roots from Python, NVRTC located by file (cache keys) and dlopen'ed on first compile, nvJitLink, the header picks.
#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "jit_internal.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/nvjitlink_api.hpp"
#include "jitbridge/fatbin.hpp"
#include "jitbridge/nvrtc_api.hpp"

namespace jitbridge {
namespace {

// Set once by the Python package at import; read by the first search.
struct WheelRoots {
  std::mutex mutex;
  std::vector<std::string> roots;
  bool used = false;
};

WheelRoots& wheel_roots_state() {
  static WheelRoots* state = new WheelRoots;  // never destroyed: searches may run during exit
  return *state;
}

const SearchInputs& process_inputs() {
  static const SearchInputs inputs = [] {
    WheelRoots& w = wheel_roots_state();
    std::lock_guard<std::mutex> lock(w.mutex);
    w.used = true;
    return SearchInputs::from_environment(w.roots);
  }();
  return inputs;
}

// Loads `path_or_soname` (never unloaded: a library whose initialisers ran stays) and asks its
// version through `version_symbol`, a function of two int-sized out-parameters returning 0 on success.
LibraryProbe probe(const std::string& path_or_soname, const char* version_symbol) {
  LibraryProbe p;
  ::dlerror();
  void* handle = ::dlopen(path_or_soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = ::dlerror();
    p.why = err ? err : "unknown reason";
    return p;
  }
  void* symbol = ::dlsym(handle, version_symbol);
  if (!symbol) {
    p.why = fmt::format("it has no {}", version_symbol);
    return p;
  }
  // nvrtcVersion(int*, int*) and nvJitLinkVersion(unsigned*, unsigned*) both return an enum, 0 = success.
  using VersionFn = int (*)(int*, int*);
  int major = 0, minor = 0;
  if (reinterpret_cast<VersionFn>(symbol)(&major, &minor) != 0) {
    p.why = fmt::format("{} failed", version_symbol);
    return p;
  }
  Dl_info info{};
  p.path = ::dladdr(symbol, &info) && info.dli_fname ? info.dli_fname : path_or_soname;
  p.loaded = true;
  p.major = major;
  p.minor = minor;
  p.handle = handle;
  return p;
}

// NVRTC dlopens its builtins (libnvrtc-builtins.so.<major>.<minor>) by soname, through the loader path only: a
// wheel's copy loaded by absolute path would not find the ones beside it (or would take a toolkit's). Loaded here
// first from NVRTC's own directory, they are what that soname resolves to in this process.
void preload_builtins(ComponentPick& pick, int major, int minor) {
  std::string dir = pick.path.substr(0, pick.path.find_last_of('/') + 1);
  std::string builtins = fmt::format("{}libnvrtc-builtins.so.{}.{}", dir, major, minor);
  if (::dlopen(builtins.c_str(), RTLD_NOW | RTLD_LOCAL)) return;
  const char* err = ::dlerror();
  pick.note = fmt::format("its builtins {} could not be loaded ({}); NVRTC will look for them on the loader path",
                          builtins, err ? err : "unknown reason");
}

struct NvrtcState {
  ComponentPick pick;
  NvrtcApi api;
  std::string error;  // "" when api is usable
};

std::atomic<bool> nvrtc_state_ready{false};  // nvrtc_state() ran to its end once

const NvrtcState& nvrtc_state() {
  static const NvrtcState state = [] {
    NvrtcState s;
    void* handle = nullptr;
    s.pick = pick_library(CudaLibrary::nvrtc, process_inputs(), [&](const std::string& path) {
      LibraryProbe p = probe(path, "nvrtcVersion");
      handle = p.handle;  // the last probe is the picked one when the search succeeds
      return p;
    });
    if (!s.pick.found) {
      s.error = not_found_message(s.pick);
      return s;
    }
    std::string missing;
#define JITBRIDGE_NVRTC_LOAD(name)                                          \
  s.api.name = reinterpret_cast<decltype(s.api.name)>(::dlsym(handle, #name)); \
  if (!s.api.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
    JITBRIDGE_NVRTC_ENTRIES(JITBRIDGE_NVRTC_LOAD)
#undef JITBRIDGE_NVRTC_LOAD
#define JITBRIDGE_NVRTC_LOAD_OPTIONAL(name) s.api.name = reinterpret_cast<decltype(s.api.name)>(::dlsym(handle, #name));
    JITBRIDGE_NVRTC_OPTIONAL_ENTRIES(JITBRIDGE_NVRTC_LOAD_OPTIONAL)
#undef JITBRIDGE_NVRTC_LOAD_OPTIONAL
    if (!missing.empty()) {
      s.error = fmt::format("NVRTC at {} ({}) lacks {}", s.pick.path, s.pick.rule, missing);
      s.pick.found = false;
      s.pick.error = s.error;
      return s;
    }
    s.api.nvrtcVersion(&s.api.major, &s.api.minor);
    preload_builtins(s.pick, s.api.major, s.api.minor);
    return s;
  }();
  nvrtc_state_ready.store(true, std::memory_order_release);
  return state;
}

// The loaded NVRTC's identity, once it was searched for; throws CudaNotFoundError when none was usable.
const std::string& loaded_identity() {
  const NvrtcState& s = nvrtc_state();
  if (!s.error.empty()) throw CudaNotFoundError(s.error);
  static const std::string identity = library_identity(s.pick.path);
  return identity;
}

// Whether two NVRTC picks send the header search to the same place.
bool same_place(const ComponentPick& a, const ComponentPick& b) {
  return a.found == b.found && a.root == b.root && a.rule == b.rule;
}

struct NvJitLinkState {
  ComponentPick pick;
  int major = 0, minor = 0;
  NvJitLinkApi api;
  std::string error;  // "" when api is usable
};

const NvJitLinkState& nvjitlink_state() {
  static const NvJitLinkState state = [] {
    NvJitLinkState s;
    LibraryProbe last;
    s.pick = pick_library(CudaLibrary::nvjitlink, process_inputs(), [&](const std::string& path) {
      last = probe(path, "nvJitLinkVersion");
      return last;
    });
    if (!s.pick.found) {
      s.error = not_found_message(s.pick);
      return s;
    }
    s.major = last.major;
    s.minor = last.minor;
    std::string missing;
#define JITBRIDGE_NVJITLINK_LOAD(name)                                                                 \
  s.api.name = reinterpret_cast<decltype(s.api.name)>(::dlsym(last.handle, "__nvJitLink" #name "_13_0")); \
  if (!s.api.name) missing += (missing.empty() ? "" : ", ") + std::string("__nvJitLink" #name "_13_0");
    JITBRIDGE_NVJITLINK_ENTRIES(JITBRIDGE_NVJITLINK_LOAD)
#undef JITBRIDGE_NVJITLINK_LOAD
    if (!missing.empty()) {
      s.error = fmt::format("nvJitLink at {} ({}) lacks {}", s.pick.path, s.pick.rule, missing);
      s.pick.found = false;
      s.pick.error = s.error;
      return s;
    }
    s.api.major = s.major;
    s.api.minor = s.minor;
    return s;
  }();
  return state;
}

struct NvFatbinState {
  ComponentPick pick;
  void* handle = nullptr;
  int major = 0, minor = 0;
};

const NvFatbinState& nvfatbin_state() {
  static const NvFatbinState state = [] {
    NvFatbinState s;
    LibraryProbe last;
    s.pick = pick_library(CudaLibrary::nvfatbin, process_inputs(), [&](const std::string& path) {
      last = probe(path, "nvFatbinVersion");
      return last;
    });
    if (s.pick.found) {
      s.handle = last.handle;
      s.major = last.major;
      s.minor = last.minor;
    }
    return s;
  }();
  return state;
}

}  // namespace

const ComponentPick& nvfatbin_pick() { return nvfatbin_state().pick; }

std::pair<int, int> nvfatbin_version() {
  const NvFatbinState& s = nvfatbin_state();
  if (!s.pick.found) throw CudaNotFoundError(not_found_message(s.pick));
  return {s.major, s.minor};
}

void* detail::nvfatbin_library() {
  const NvFatbinState& s = nvfatbin_state();
  if (!s.pick.found) throw CudaNotFoundError(not_found_message(s.pick));
  return s.handle;
}

void set_cuda_wheel_roots(std::vector<std::string> roots) {
  WheelRoots& w = wheel_roots_state();
  std::lock_guard<std::mutex> lock(w.mutex);
  if (w.used && roots != w.roots)
    throw std::logic_error("set_cuda_wheel_roots: the CUDA search already ran; give the wheel roots before the "
                           "first compile");
  w.roots = std::move(roots);
}

const std::vector<std::string>& cuda_wheel_roots() { return process_inputs().wheel_roots; }

const ComponentPick& nvrtc_pick() { return nvrtc_state().pick; }

const ComponentPick& nvjitlink_pick() { return nvjitlink_state().pick; }

const ComponentPick& nvrtc_located() {
  static const ComponentPick located = locate_library(
      CudaLibrary::nvrtc, process_inputs(), [](const std::string& soname) { return probe(soname, "nvrtcVersion"); });
  return located;
}

bool nvrtc_load_attempted() noexcept { return nvrtc_state_ready.load(std::memory_order_acquire); }

const std::string& nvrtc_identity() {
  if (nvrtc_load_attempted()) return loaded_identity();
  const ComponentPick& located = nvrtc_located();
  if (!located.found) return loaded_identity();  // the loading search says what is missing
  static const std::string identity = library_identity(located.path);
  return identity;
}

const HeaderPicks& cuda_header_picks() {
  if (nvrtc_load_attempted() && !same_place(nvrtc_pick(), nvrtc_located())) {
    // The located file proved unusable and the search went on: headers from the loaded one's place.
    static const HeaderPicks after_load = pick_headers(process_inputs(), nvrtc_pick());
    return after_load;
  }
  static const HeaderPicks picks = pick_headers(process_inputs(), nvrtc_located());
  return picks;
}

const NvrtcApi& nvrtc_api() {
  const NvrtcState& s = nvrtc_state();
  if (!s.error.empty()) throw CudaNotFoundError(s.error);
  return s.api;
}

const NvJitLinkApi& nvjitlink_api() {
  const NvJitLinkState& s = nvjitlink_state();
  if (!s.error.empty()) throw CudaNotFoundError(s.error);
  return s.api;
}

const std::string& nvjitlink_identity() {
  const NvJitLinkState& s = nvjitlink_state();
  if (!s.error.empty()) throw CudaNotFoundError(s.error);
  static const std::string identity = library_identity(s.pick.path);
  return identity;
}

const ComponentPick& device_runtime_pick() {
  static const ComponentPick pick = pick_device_runtime(process_inputs(), nvjitlink_pick());
  return pick;
}

std::pair<int, int> nvjitlink_version() {
  const NvJitLinkState& s = nvjitlink_state();
  if (!s.pick.found) throw CudaNotFoundError(not_found_message(s.pick));
  return {s.major, s.minor};
}

namespace detail {

const std::vector<std::string>& compile_include_dirs() {
  const HeaderPicks& picks = cuda_header_picks();
  if (!picks.cuda.error.empty()) throw CudaNotFoundError(picks.cuda.error);
  return picks.include_dirs;
}

std::string missing_headers_hint() {
  const HeaderPicks& picks = cuda_header_picks();
  std::string missing;
  if (!picks.cuda.found) missing = "the CUDA headers (cuda_fp16.h, cuda_bf16.h, ...)";
  if (!picks.cccl.found) missing += std::string(missing.empty() ? "" : " and ") + "the CCCL headers (cuda/std, cub)";
  if (missing.empty()) return {};
  return fmt::format("jitbridge: note: {} were not found: pip install nvidia-cuda-runtime nvidia-cuda-cccl, install "
                     "the CUDA toolkit, or set JITBRIDGE_CUDA_INCLUDE ('python -m jitbridge doctor' shows where "
                     "jitbridge looked)",
                     missing);
}

}  // namespace detail
}  // namespace jitbridge
