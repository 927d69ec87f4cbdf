// jitbridge/cuda_search.hpp — where NVRTC, nvJitLink and the CUDA headers NVRTC compiles against come from at run time.
//
// Nothing from CUDA is linked: the libraries are dlopen'ed on first use from the first place of
// this order that has a usable one (docs/DESIGN.md, "Finding CUDA at run time"):
//   1. an explicit setting: JITBRIDGE_NVRTC / JITBRIDGE_NVJITLINK / JITBRIDGE_NVFATBIN (a library file),
//      JITBRIDGE_CUDADEVRT (the device runtime, libcudadevrt.a; see pick_device_runtime),
//      JITBRIDGE_CUDA_INCLUDE (include directories, ':'-separated);
//   2. the nvidia-* wheels of the Python environment (<site-packages>/nvidia/cu13, handed in by
//      the Python package through set_cuda_wheel_roots());
//   3. CUDA_HOME, then CUDA_PATH;  4. /usr/local/cuda;  5. the loader path (dlopen by soname).
// Headers come first from NVRTC's own place, then from the same order (without the loader path).
// Cache keys name the NVRTC file the order locates by existence alone (nvrtc_located()), so a
// cache hit loads nothing; a compile loads it (nvrtc_pick()).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "jitbridge/jit.hpp"

namespace jitbridge {

// A CUDA component jitbridge needs (NVRTC, nvJitLink) was not found, or an explicit setting
// (JITBRIDGE_NVRTC & co.) points at nothing usable. what() names what to install and every place
// searched with why it was skipped. A kind of NvrtcError: code catching that keeps working.
class CudaNotFoundError : public NvrtcError {
 public:
  using NvrtcError::NvrtcError;
};

// One place the search looked at, and why it did not take it.
struct SearchStep {
  std::string rule;  // "JITBRIDGE_NVRTC", "wheel nvidia-cuda-nvrtc in /sp", "CUDA_HOME", "loader path", ...
  std::string path;  // what was looked at ("" when the rule was not set)
  std::string why;   // "not set", "no such file", "is NVRTC 12.4; jitbridge needs 13", ...
};

// The outcome of the search for one component.
struct ComponentPick {
  std::string component;          // "nvrtc", "nvJitLink", "cuda headers", "cccl headers"
  bool found = false;
  std::string path;               // the library file (resolved), or the include directory
  std::string rule;               // the rule that picked it (as in SearchStep::rule)
  std::string root;               // the place's root: its headers are <root>/include (+ /cccl)
  std::string version;            // "13.0" for libraries, "" for headers
  std::string note;               // why a header set comes from elsewhere than NVRTC's place
  std::vector<SearchStep> tried;  // the places tried before the pick (all of them when !found)
  std::string error;              // an explicit setting is wrong: the message, naming the variable
};

// Everything the search reads from the process; tests hand in fake trees instead.
struct SearchInputs {
  std::optional<std::string> nvrtc_env;      // JITBRIDGE_NVRTC
  std::optional<std::string> nvjitlink_env;  // JITBRIDGE_NVJITLINK
  std::optional<std::string> nvfatbin_env;   // JITBRIDGE_NVFATBIN
  std::optional<std::string> include_env;    // JITBRIDGE_CUDA_INCLUDE
  std::optional<std::string> cudadevrt_env;  // JITBRIDGE_CUDADEVRT
  std::vector<std::string> wheel_roots;      // <site-packages>/nvidia/cu13 directories, in order
  std::optional<std::string> cuda_home;      // CUDA_HOME
  std::optional<std::string> cuda_path;      // CUDA_PATH
  std::string standard_root = "/usr/local/cuda";

  // This process's environment variables (empty ones count as unset) and the given wheel roots.
  static SearchInputs from_environment(std::vector<std::string> wheel_roots);
};

// What loading one candidate library gave.
struct LibraryProbe {
  bool loaded = false;
  bool located_only = false;  // taken by the file's existence alone (locate_library): not loaded, version unknown
  int major = 0, minor = 0;  // the library's own version, when loaded
  std::string path;          // the file actually loaded (resolved; for a soname, where the loader found it)
  std::string why;           // why it could not be loaded
  void* handle = nullptr;    // dlopen handle (nullptr in tests)
};
// Loads a library given by path, or by bare soname for the loader-path rule, and reads its version.
using LibraryLoader = std::function<LibraryProbe(const std::string& path_or_soname)>;

enum class CudaLibrary { nvrtc, nvjitlink, nvfatbin };

// Picks `which` by the search order from `in`, loading candidates with `load` until one loads
// and is major version 13. An explicit setting that is missing or unusable gives error != ""
// (no fallback). Never throws (except std::bad_alloc).
ComponentPick pick_library(CudaLibrary which, const SearchInputs& in, const LibraryLoader& load);

// Which file pick_library would try first, without loading it: the same order, a candidate taken
// by its existence alone (version "" in the result; whether it loads and is major 13 is left to
// pick_library). Only the loader-path rule (a bare soname, which only the loader resolves) is
// handed to `load_soname`. When pick_library later finds the located file unusable it goes on down
// the order, so the two can differ. Never throws (except std::bad_alloc).
ComponentPick locate_library(CudaLibrary which, const SearchInputs& in, const LibraryLoader& load_soname);

// A library file's identity for cache keys: "<realpath> (<size> bytes, mtime <s>.<ns>)" (the
// path as given when it cannot be stat'ed). Reads the file system only; never throws (except bad_alloc).
std::string library_identity(const std::string& path);

// The two header sets NVRTC needs, each searched on its own.
struct HeaderPicks {
  ComponentPick cuda;                     // cuda_fp16.h, cuda_bf16.h, cooperative_groups.h, ...
  ComponentPick cccl;                     // cuda/std/..., cub/, thrust/
  std::vector<std::string> include_dirs;  // what every compile gets as -I, in order
};
// Picks the header directories: JITBRIDGE_CUDA_INCLUDE, then NVRTC's own place (`nvrtc`, when
// found), then wheels, CUDA_HOME, CUDA_PATH, the standard root. Never throws (except bad_alloc).
HeaderPicks pick_headers(const SearchInputs& in, const ComponentPick& nvrtc);

// Picks the device runtime (libcudadevrt.a, a static device library that dynamic parallelism
// links against): JITBRIDGE_CUDADEVRT (a file: used or an error, never skipped); then beside
// nvJitLink (`nvjitlink`, when found): a wheel root's lib/ (the nvidia-cuda-runtime wheel puts it
// in nvidia/cu13/lib), a toolkit's lib64, lib, targets/<platform>/lib; then the wheels, CUDA_HOME,
// CUDA_PATH and the standard root in that order. Reads the file system only; never throws (except
// bad_alloc). version is "" (an archive has none).
ComponentPick pick_device_runtime(const SearchInputs& in, const ComponentPick& nvjitlink);

// The message of the error every compile raises when `pick` (a library) was not found.
std::string not_found_message(const ComponentPick& pick);

// ---- this process ---------------------------------------------------------------------------

// Where the Python package found nvidia/cu13 directories (sys.path order). Must come before the
// first search; throws std::logic_error when a search already ran with other roots.
void set_cuda_wheel_roots(std::vector<std::string> roots);

// The searches of this process (each runs once, on first use, thread-safe; libraries get loaded).
// Never throws (except bad_alloc): what is missing shows as found == false.
const ComponentPick& nvrtc_pick();
const ComponentPick& nvjitlink_pick();
const ComponentPick& nvfatbin_pick();  // libnvfatbin (fat binaries for a list of targets: jitbridge/fatbin.hpp)
// The header sets, from NVRTC's place: the located one (nvrtc_located()) until NVRTC is loaded,
// the loaded one after if that is elsewhere (the located file proved unusable).
const HeaderPicks& cuda_header_picks();

// Which NVRTC file this process would load, by file existence (locate_library; runs once,
// thread-safe): what cache keys name, so that a cache hit never loads NVRTC. Only the loader-path
// rule loads the library to find it. Never throws (except bad_alloc).
const ComponentPick& nvrtc_located();
// Whether nvrtc_pick() ran in this process (a compile that missed the cache, nvrtc_version(),
// doctor): a cache hit leaves it false. Never throws.
bool nvrtc_load_attempted() noexcept;
// The identity (library_identity) of the NVRTC that compiles in this process: the loaded one once
// nvrtc_pick() ran, else the located one. Loads nothing unless nothing was located (then it runs
// the loading search, which throws CudaNotFoundError naming what to install).
const std::string& nvrtc_identity();
const std::vector<std::string>& cuda_wheel_roots();

// The device runtime this process links dynamic-parallelism code against (pick_device_runtime
// beside nvjitlink_pick(); runs once, thread-safe, loads nvJitLink). Never throws (except bad_alloc).
const ComponentPick& device_runtime_pick();

// nvJitLink's version as {major, minor}; throws CudaNotFoundError when it was not found.
std::pair<int, int> nvjitlink_version();

}  // namespace jitbridge
