// cuda_search.cpp — the one search order for NVRTC, nvJitLink and the CUDA headers, loading or locating by existence (reads the file system; loads only through the loader it is given).
#include "jitbridge/cuda_search.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace jitbridge {
namespace {

constexpr int kMajor = 13;  // nvrtc.h and the wheels' nvidia/cu13 layout are CUDA 13's
#if defined(__aarch64__)
constexpr const char* kTargetDir = "targets/sbsa-linux";
#else
constexpr const char* kTargetDir = "targets/x86_64-linux";
#endif

struct LibrarySpec {
  const char* component;  // "nvrtc"
  const char* display;    // "NVRTC"
  const char* stem;       // "libnvrtc.so."
  const char* env;        // "JITBRIDGE_NVRTC"
  const char* wheel;      // "nvidia-cuda-nvrtc"
  const char* install;    // what the not-found message says to install
  std::string file() const { return fmt::format("{}{}", stem, kMajor); }
};

const LibrarySpec& spec(CudaLibrary which) {
  static const LibrarySpec nvrtc{"nvrtc", "NVRTC", "libnvrtc.so.", "JITBRIDGE_NVRTC", "nvidia-cuda-nvrtc",
                                 "nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cccl"};
  static const LibrarySpec nvjitlink{"nvJitLink", "nvJitLink", "libnvJitLink.so.", "JITBRIDGE_NVJITLINK",
                                     "nvidia-nvjitlink", "nvidia-nvjitlink"};
  static const LibrarySpec nvfatbin{"nvFatbin", "nvFatbin", "libnvfatbin.so.", "JITBRIDGE_NVFATBIN", "nvidia-nvfatbin",
                                    "nvidia-nvfatbin"};
  if (which == CudaLibrary::nvfatbin) return nvfatbin;
  return which == CudaLibrary::nvrtc ? nvrtc : nvjitlink;
}

struct HeaderSpec {
  const char* component;  // "cuda headers"
  const char* marker;     // the file that shows the set is there
  const char* shows;      // how the set is named in reasons: "cuda_fp16.h"
  const char* wheel;      // the wheel that ships the set
  std::vector<const char*> subdirs;  // where the set lies under a place's root, in order
};

const HeaderSpec kCudaHeaders{"cuda headers", "cuda_fp16.h", "cuda_fp16.h", "nvidia-cuda-runtime", {"include"}};
// CUDA 13 keeps CCCL in include/cccl; older layouts had cuda/std directly in include.
const HeaderSpec kCcclHeaders{"cccl headers", "cuda/std/type_traits", "cuda/std", "nvidia-cuda-cccl",
                              {"include/cccl", "include"}};

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
std::string parent(const std::string& path) {
  std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}
// realpath() costs one readlink per path component, and one search asks for the same few roots many times (a
// fresh process's first disk-cache hit made ~60 readlinks for /usr/local/cuda alone). A CanonicalMemo on the stack
// of each entry point answers the repeats within that search only, so a later search sees links as they are then.
thread_local std::vector<std::pair<std::string, std::string>>* t_canonical_memo = nullptr;
class CanonicalMemo {
 public:
  CanonicalMemo() : owner_(t_canonical_memo == nullptr) {
    if (owner_) t_canonical_memo = &entries_;
  }
  ~CanonicalMemo() {
    if (owner_) t_canonical_memo = nullptr;
  }
  CanonicalMemo(const CanonicalMemo&) = delete;
  CanonicalMemo& operator=(const CanonicalMemo&) = delete;

 private:
  bool owner_;
  std::vector<std::pair<std::string, std::string>> entries_;
};

std::string canonical(const std::string& path) {
  if (t_canonical_memo)
    for (const auto& [given, real] : *t_canonical_memo)
      if (given == path) return real;
  char* real = ::realpath(path.c_str(), nullptr);
  std::string out = real ? std::string(real) : path;
  std::free(real);
  if (t_canonical_memo) t_canonical_memo->emplace_back(path, out);
  return out;
}

// `path` made absolute (symlinks kept: the place is where the user pointed, not where a link leads).
std::string absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char buf[4096];
  if (!::getcwd(buf, sizeof buf)) return path;
  return std::string(buf) + "/" + path;
}

// "<site-packages>" of a "<site-packages>/nvidia/cu13" root.
std::string site_packages(const std::string& wheel_root) {
  return parent(parent(wheel_root));
}

// Other majors of a library in `dir` ("libnvrtc.so.12"), for the reason a place was skipped.
std::vector<std::string> other_majors(const std::string& dir, const std::string& stem) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, stem.size(), stem) != 0) continue;
    std::string version = name.substr(stem.size());
    std::string major = version.substr(0, version.find('.'));
    if (!major.empty() && major.find_first_not_of("0123456789") == std::string::npos &&
        major != std::to_string(kMajor))
      out.push_back(name);
  }
  ::closedir(d);
  return out;
}

// One place of the search order.
struct Place {
  std::string rule;
  std::string root;
  std::string unusable;  // "not set", "no such directory"; "" when the place can be looked into
  bool wheel = false;
};

// Wheels, CUDA_HOME, CUDA_PATH, the standard root: the order after the explicit setting.
// `wheel` names the wheel that would ship the component in a wheel root.
std::vector<Place> places(const SearchInputs& in, const char* wheel) {
  std::vector<Place> out;
  for (const std::string& root : in.wheel_roots)
    out.push_back({fmt::format("wheel {} in {}", wheel, site_packages(root)), root,
                   is_dir(root) ? "" : "no such directory", true});
  auto toolkit = [&](const char* rule, const std::optional<std::string>& root) {
    if (!root) out.push_back({rule, "", "not set"});
    else out.push_back({rule, *root, is_dir(*root) ? "" : "no such directory"});
  };
  toolkit("CUDA_HOME", in.cuda_home);
  toolkit("CUDA_PATH", in.cuda_path);
  toolkit(in.standard_root.c_str(), in.standard_root);
  return out;
}

std::vector<std::string> library_dirs(const Place& place) {
  if (place.wheel) return {place.root + "/lib"};
  return {place.root + "/lib64", place.root + "/lib", fmt::format("{}/{}/lib", place.root, kTargetDir)};
}

// Why a place without the library file was skipped.
std::string missing_reason(const Place& place, const LibrarySpec& s) {
  std::vector<std::string> dirs = library_dirs(place);
  std::string why = place.wheel ? fmt::format("no lib/{}", s.file())
                                : fmt::format("no {} in lib64, lib or {}/lib", s.file(), kTargetDir);
  for (const std::string& dir : dirs)
    for (const std::string& other : other_majors(dir, s.stem))
      why += fmt::format("; {}/{} is another CUDA major (jitbridge needs {})", dir, other, kMajor);
  return why;
}

std::vector<std::string> split_dirs(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string join_steps(const std::vector<SearchStep>& steps) {
  std::string out;
  for (const SearchStep& s : steps) {
    if (!out.empty()) out += "; ";
    out += s.rule;
    if (!s.path.empty() && s.path != s.rule) out += " " + s.path;
    out += ": " + s.why;
  }
  return out;
}

// False when `root` (canonical) is in `seen` already; else records it and returns true.
bool first_visit(std::vector<std::string>& seen, const std::string& root) {
  std::string real = canonical(root);
  for (const std::string& r : seen)
    if (r == real) return false;
  seen.push_back(std::move(real));
  return true;
}

// The place NVRTC came from, as a header place: its rule in the header's terms.
Place nvrtc_place(const ComponentPick& nvrtc, const std::vector<Place>& order) {
  for (const Place& p : order)
    if (p.unusable.empty() && canonical(p.root) == canonical(nvrtc.root)) return p;
  return {fmt::format("beside NVRTC ({})", nvrtc.rule), nvrtc.root, is_dir(nvrtc.root) ? "" : "no such directory"};
}

ComponentPick pick_header_set(const HeaderSpec& s, const SearchInputs& in, const std::vector<std::string>& explicit_dirs,
                              const ComponentPick& nvrtc) {
  ComponentPick out;
  out.component = s.component;
  auto take = [&](const std::string& rule, const std::string& root, const std::string& dir) {
    out.found = true;
    out.rule = rule;
    out.root = root;
    out.path = canonical(dir);
  };
  if (in.include_env) {
    for (const std::string& dir : explicit_dirs)
      if (is_file(dir + "/" + s.marker)) {
        take("JITBRIDGE_CUDA_INCLUDE", dir, dir);
        return out;
      }
    out.tried.push_back({"JITBRIDGE_CUDA_INCLUDE", *in.include_env, fmt::format("no {} there", s.shows)});
  } else {
    out.tried.push_back({"JITBRIDGE_CUDA_INCLUDE", "", "not set"});
  }
  std::vector<Place> order = places(in, s.wheel);
  std::string own_root;
  if (nvrtc.found && !nvrtc.root.empty()) {
    Place own = nvrtc_place(nvrtc, order);
    own_root = canonical(own.root);
    order.insert(order.begin(), own);
  }
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Place& place = order[i];
    if (!place.unusable.empty()) {
      out.tried.push_back({place.rule, place.root, place.unusable});
      continue;
    }
    if (!first_visit(seen, place.root)) continue;  // the same directory reached by two rules (CUDA_HOME=/usr/local/cuda)
    for (const char* sub : s.subdirs) {
      std::string dir = place.root + "/" + sub;
      if (!is_file(dir + "/" + s.marker)) continue;
      take(place.rule, place.root, dir);
      if (!own_root.empty() && i > 0)
        out.note = fmt::format("NVRTC's own place ({}) has no {}", order[0].root, s.shows);
      return out;
    }
    out.tried.push_back({place.rule, place.root + "/" + s.subdirs[0], fmt::format("no {} there", s.shows)});
  }
  return out;
}

}  // namespace

SearchInputs SearchInputs::from_environment(std::vector<std::string> wheel_roots) {
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  };
  SearchInputs in;
  in.nvrtc_env = env("JITBRIDGE_NVRTC");
  in.nvjitlink_env = env("JITBRIDGE_NVJITLINK");
  in.nvfatbin_env = env("JITBRIDGE_NVFATBIN");
  in.include_env = env("JITBRIDGE_CUDA_INCLUDE");
  in.cudadevrt_env = env("JITBRIDGE_CUDADEVRT");
  in.wheel_roots = std::move(wheel_roots);
  in.cuda_home = env("CUDA_HOME");
  in.cuda_path = env("CUDA_PATH");
  return in;
}

ComponentPick pick_library(CudaLibrary which, const SearchInputs& in, const LibraryLoader& load) {
  CanonicalMemo memo;
  const LibrarySpec& s = spec(which);
  const std::string file = s.file();
  ComponentPick out;
  out.component = s.component;
  // "" when the probe gave a usable library, else why not.
  auto judge = [&](const LibraryProbe& p) -> std::string {
    if (!p.loaded) return fmt::format("could not be loaded: {}", p.why);
    if (p.located_only) return "";
    if (p.major != kMajor)
      return fmt::format("is {} {}.{}; jitbridge needs {}", s.display, p.major, p.minor, kMajor);
    return "";
  };
  auto take = [&](const LibraryProbe& p, const std::string& rule, const std::string& root) {
    out.found = true;
    out.path = p.path;
    out.rule = rule;
    out.root = root;
    out.version = p.located_only ? "" : fmt::format("{}.{}", p.major, p.minor);
  };

  // 1. The explicit setting: used or an error, never skipped.
  const std::optional<std::string>& setting = which == CudaLibrary::nvfatbin ? in.nvfatbin_env
                                              : which == CudaLibrary::nvrtc  ? in.nvrtc_env
                                                                             : in.nvjitlink_env;
  if (setting) {
    std::string why;
    if (!exists(*setting)) {
      why = "no such file";
    } else if (is_dir(*setting)) {
      why = fmt::format("is a directory; give the path of the library itself ({})", file);
    } else {
      LibraryProbe p = load(absolute(*setting));
      why = judge(p);
      if (why.empty()) {
        take(p, s.env, parent(parent(p.path)));
        return out;
      }
    }
    out.tried.push_back({s.env, *setting, why});
    out.error = fmt::format("{}={}: {} (unset it to search the Python environment's wheels and the CUDA toolkits)",
                            s.env, *setting, why);
    return out;
  }
  out.tried.push_back({s.env, "", "not set"});

  // 2-4. Wheels, CUDA_HOME, CUDA_PATH, the standard location.
  for (const Place& place : places(in, s.wheel)) {
    if (!place.unusable.empty()) {
      out.tried.push_back({place.rule, place.root, place.unusable});
      continue;
    }
    bool any = false;
    for (const std::string& dir : library_dirs(place)) {
      std::string path = dir + "/" + file;
      if (!is_file(path)) continue;
      any = true;
      LibraryProbe p = load(path);
      std::string why = judge(p);
      if (why.empty()) {
        take(p, place.rule, place.root);
        return out;
      }
      out.tried.push_back({place.rule, path, why});
    }
    if (!any) out.tried.push_back({place.rule, place.root, missing_reason(place, s)});
  }

  // 5. The loader path (ldconfig, LD_LIBRARY_PATH) by soname.
  LibraryProbe p = load(file);
  std::string why = judge(p);
  if (why.empty()) {
    take(p, "loader path", parent(parent(p.path)));
    return out;
  }
  out.tried.push_back({"loader path", file, why});
  return out;
}

ComponentPick locate_library(CudaLibrary which, const SearchInputs& in, const LibraryLoader& load_soname) {
  return pick_library(which, in, [&](const std::string& path_or_soname) {
    if (path_or_soname.find('/') == std::string::npos) return load_soname(path_or_soname);
    LibraryProbe p;  // pick_library offers only files that exist
    p.loaded = true;
    p.located_only = true;
    p.path = path_or_soname;
    return p;
  });
}

std::string library_identity(const std::string& path) {
  CanonicalMemo memo;
  std::string real = canonical(path);
  struct stat st;
  if (::stat(real.c_str(), &st) != 0) return real;
  return fmt::format("{} ({} bytes, mtime {}.{:09})", real, static_cast<long long>(st.st_size),
                     static_cast<long long>(st.st_mtim.tv_sec), static_cast<long>(st.st_mtim.tv_nsec));
}

HeaderPicks pick_headers(const SearchInputs& in, const ComponentPick& nvrtc) {
  CanonicalMemo memo;
  HeaderPicks out;
  std::vector<std::string> explicit_dirs;
  if (in.include_env) {
    explicit_dirs = split_dirs(*in.include_env);
    std::string error;
    for (const std::string& dir : explicit_dirs)
      if (!is_dir(dir)) error += fmt::format("{}{} is not a directory", error.empty() ? "" : "; ", dir);
    if (explicit_dirs.empty()) error = "names no directory";
    if (!error.empty()) {
      for (ComponentPick* pick : {&out.cuda, &out.cccl}) {
        pick->component = pick == &out.cuda ? kCudaHeaders.component : kCcclHeaders.component;
        pick->error = fmt::format("JITBRIDGE_CUDA_INCLUDE={}: {} (unset it to use the headers beside NVRTC)",
                                  *in.include_env, error);
        pick->tried.push_back({"JITBRIDGE_CUDA_INCLUDE", *in.include_env, error});
      }
      return out;
    }
  }
  out.cuda = pick_header_set(kCudaHeaders, in, explicit_dirs, nvrtc);
  out.cccl = pick_header_set(kCcclHeaders, in, explicit_dirs, nvrtc);
  auto add = [&](const std::string& dir) {
    for (const std::string& d : out.include_dirs)
      if (d == dir) return;
    out.include_dirs.push_back(dir);
  };
  for (const std::string& dir : explicit_dirs) add(canonical(dir));
  if (out.cuda.found) add(out.cuda.path);
  if (out.cccl.found) add(out.cccl.path);
  return out;
}

ComponentPick pick_device_runtime(const SearchInputs& in, const ComponentPick& nvjitlink) {
  CanonicalMemo memo;
  constexpr const char* kFile = "libcudadevrt.a";
  ComponentPick out;
  out.component = "device runtime";
  if (in.cudadevrt_env) {
    std::string why;
    if (!exists(*in.cudadevrt_env)) why = "no such file";
    else if (!is_file(*in.cudadevrt_env)) why = fmt::format("is not a file; give the path of {} itself", kFile);
    if (why.empty()) {
      out.found = true;
      out.path = canonical(absolute(*in.cudadevrt_env));
      out.rule = "JITBRIDGE_CUDADEVRT";
      out.root = parent(parent(out.path));
      return out;
    }
    out.tried.push_back({"JITBRIDGE_CUDADEVRT", *in.cudadevrt_env, why});
    out.error = fmt::format("JITBRIDGE_CUDADEVRT={}: {} (unset it to use the one beside nvJitLink)",
                            *in.cudadevrt_env, why);
    return out;
  }
  out.tried.push_back({"JITBRIDGE_CUDADEVRT", "", "not set"});
  std::vector<Place> order = places(in, "nvidia-cuda-runtime");
  if (nvjitlink.found && !nvjitlink.root.empty()) {
    Place own{fmt::format("beside nvJitLink ({})", nvjitlink.rule), nvjitlink.root,
              is_dir(nvjitlink.root) ? "" : "no such directory", nvjitlink.rule.rfind("wheel ", 0) == 0};
    order.insert(order.begin(), own);
  }
  std::vector<std::string> seen;
  for (const Place& place : order) {
    if (!place.unusable.empty()) {
      out.tried.push_back({place.rule, place.root, place.unusable});
      continue;
    }
    if (!first_visit(seen, place.root)) continue;  // nvJitLink's place again, or CUDA_HOME=/usr/local/cuda
    for (const std::string& dir : library_dirs(place)) {
      if (!is_file(dir + "/" + kFile)) continue;
      out.found = true;
      out.path = canonical(dir + "/" + kFile);
      out.rule = place.rule;
      out.root = place.root;
      return out;
    }
    out.tried.push_back({place.rule, place.root,
                         place.wheel ? fmt::format("no lib/{}", kFile)
                                     : fmt::format("no {} in lib64, lib or {}/lib", kFile, kTargetDir)});
  }
  return out;
}

std::string not_found_message(const ComponentPick& pick) {
  if (pick.component == "device runtime") {
    if (!pick.error.empty()) return fmt::format("the CUDA device runtime could not be used: {}", pick.error);
    return fmt::format("the CUDA device runtime (libcudadevrt.a, needed to link dynamic parallelism) was not found: "
                       "pip install nvidia-cuda-runtime, install the CUDA toolkit, or set JITBRIDGE_CUDADEVRT "
                       "(searched: {})",
                       join_steps(pick.tried));
  }
  const LibrarySpec& s = spec(pick.component == "nvrtc"      ? CudaLibrary::nvrtc
                              : pick.component == "nvFatbin" ? CudaLibrary::nvfatbin
                                                             : CudaLibrary::nvjitlink);
  if (!pick.error.empty()) return fmt::format("{} could not be loaded: {}", s.display, pick.error);
  return fmt::format("{} was not found: pip install {}, or install the CUDA toolkit (searched: {})", s.display,
                     s.install, join_steps(pick.tried));
}

}  // namespace jitbridge
