// test_cuda_locator.cpp — the CUDA search order on fake trees: each rule, their precedence, header fallbacks, explicit settings that point at nothing, other CUDA majors, locating without loading.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>

#include "jitbridge/cuda_search.hpp"
#include "jitbridge/nvrtc_api.hpp"
#include "temp_dir.hpp"

using namespace jitbridge;
using jitbridge::testing::TempDir;

namespace {

void mkdirs(const std::string& path) {
  for (std::size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

// A file holding `text`, its directories made.
void put(const std::string& path, const std::string& text = "x") {
  mkdirs(path.substr(0, path.find_last_of('/')));
  std::ofstream(path) << text;
}

// Fake libraries are text files holding their version ("13.0", "12.4") or "bad" (not loadable).
// A bare soname (the loader-path rule) resolves through `loader_path`, as ld.so would.
struct FakeLoader {
  std::map<std::string, std::string> loader_path;  // soname -> file
  std::vector<std::string> loaded;                 // what was asked, in order

  LibraryLoader fn() {
    return [this](const std::string& name) {
      loaded.push_back(name);
      LibraryProbe p;
      std::string file = name;
      if (name.find('/') == std::string::npos) {
        auto it = loader_path.find(name);
        if (it == loader_path.end()) {
          p.why = name + ": cannot open shared object file";
          return p;
        }
        file = it->second;
      }
      std::ifstream in(file);
      std::string text;
      in >> text;
      if (!in && text.empty()) {
        p.why = file + ": cannot open shared object file";
        return p;
      }
      if (text == "bad") {
        p.why = file + ": invalid ELF header";
        return p;
      }
      p.loaded = true;
      p.major = std::atoi(text.c_str());
      p.minor = std::atoi(text.substr(text.find('.') + 1).c_str());
      p.path = file;
      return p;
    };
  }
};

// A fake nvidia/cu13 wheel root under `site`: lib/libnvrtc.so.13 and, as asked, the header sets.
std::string wheel(const std::string& site, bool nvrtc = true, bool cuda_headers = true, bool cccl = true) {
  std::string root = site + "/nvidia/cu13";
  mkdirs(root + "/lib");
  if (nvrtc) put(root + "/lib/libnvrtc.so.13", "13.0");
  if (cuda_headers) put(root + "/include/cuda_fp16.h");
  if (cccl) put(root + "/include/cccl/cuda/std/type_traits");
  return root;
}

// A fake toolkit: lib64/libnvrtc.so.13 (version `version`, or none when empty) and both header sets.
std::string toolkit(const std::string& root, const std::string& version = "13.0", bool headers = true) {
  mkdirs(root + "/lib64");
  if (!version.empty()) put(root + "/lib64/libnvrtc.so.13", version);
  if (headers) {
    put(root + "/include/cuda_fp16.h");
    put(root + "/include/cccl/cuda/std/type_traits");
  }
  return root;
}

// Inputs that see nothing of this machine: no variables, a standard root that does not exist.
SearchInputs nothing(const std::string& base) {
  SearchInputs in;
  in.standard_root = base + "/no-usr-local-cuda";
  return in;
}

std::string real(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  std::string out = r ? r : path;
  std::free(r);
  return out;
}

}  // namespace

TEST_CASE("cuda search: each rule picks, in precedence order") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  FakeLoader loader;
  loader.loader_path["libnvrtc.so.13"] = base + "/ld/lib/libnvrtc.so.13";
  put(base + "/ld/lib/libnvrtc.so.13", "13.1");
  SearchInputs in = nothing(base);

  // Only the loader path.
  ComponentPick p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  REQUIRE(p.found);
  CHECK(p.rule == "loader path");
  CHECK(p.path == base + "/ld/lib/libnvrtc.so.13");
  CHECK(p.version == "13.1");
  CHECK(p.root == base + "/ld");
  REQUIRE(p.tried.size() == 4);  // JITBRIDGE_NVRTC, CUDA_HOME, CUDA_PATH, the standard root
  CHECK(p.tried[0].rule == "JITBRIDGE_NVRTC");
  CHECK(p.tried[0].why == "not set");
  CHECK(p.tried[1].rule == "CUDA_HOME");
  CHECK(p.tried[3].why == "no such directory");

  // The standard root beats the loader path.
  in.standard_root = toolkit(base + "/usr-local-cuda");
  p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK(p.rule == in.standard_root);
  CHECK(p.path == in.standard_root + "/lib64/libnvrtc.so.13");

  // CUDA_PATH beats it, CUDA_HOME beats CUDA_PATH.
  in.cuda_path = toolkit(base + "/cuda-path");
  p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK(p.rule == "CUDA_PATH");
  in.cuda_home = toolkit(base + "/cuda-home");
  p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK(p.rule == "CUDA_HOME");
  CHECK(p.path == base + "/cuda-home/lib64/libnvrtc.so.13");

  // A wheel beats CUDA_HOME; the first wheel root in sys.path order wins.
  in.wheel_roots = {base + "/site-a/nvidia/cu13", wheel(base + "/site-b"), wheel(base + "/site-c")};
  p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK(p.rule == "wheel nvidia-cuda-nvrtc in " + base + "/site-b");
  CHECK(p.path == base + "/site-b/nvidia/cu13/lib/libnvrtc.so.13");
  CHECK(p.root == base + "/site-b/nvidia/cu13");
  REQUIRE(p.tried.size() == 2);
  CHECK(p.tried[1].rule == "wheel nvidia-cuda-nvrtc in " + base + "/site-a");
  CHECK(p.tried[1].why == "no such directory");

  // The explicit setting beats everything.
  put(base + "/mine/libnvrtc.so.13", "13.2");
  in.nvrtc_env = base + "/mine/libnvrtc.so.13";
  p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK(p.rule == "JITBRIDGE_NVRTC");
  CHECK(p.path == base + "/mine/libnvrtc.so.13");
  CHECK(p.version == "13.2");
  CHECK(p.tried.empty());
  CHECK(p.error.empty());
}

TEST_CASE("cuda search: an explicit setting that points at nothing is an error naming it, not a fallback") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  FakeLoader loader;
  SearchInputs in = nothing(base);
  in.cuda_home = toolkit(base + "/cuda-home");  // would be found without the setting

  in.nvrtc_env = base + "/missing/libnvrtc.so.13";
  ComponentPick p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK_FALSE(p.found);
  CHECK(p.error.find("JITBRIDGE_NVRTC=" + base + "/missing/libnvrtc.so.13: no such file") == 0);
  CHECK(loader.loaded.empty());  // nothing else was even tried
  CHECK(not_found_message(p).find("JITBRIDGE_NVRTC=") != std::string::npos);

  in.nvrtc_env = base;  // a directory
  p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK_FALSE(p.found);
  CHECK(p.error.find("is a directory") != std::string::npos);

  put(base + "/old/libnvrtc.so.12", "12.4");
  in.nvrtc_env = base + "/old/libnvrtc.so.12";
  p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK_FALSE(p.found);
  CHECK(p.error.find("is NVRTC 12.4; jitbridge needs 13") != std::string::npos);

  put(base + "/broken/libnvrtc.so.13", "bad");
  in.nvrtc_env = base + "/broken/libnvrtc.so.13";
  p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK(p.error.find("could not be loaded: " + base + "/broken/libnvrtc.so.13: invalid ELF header") !=
        std::string::npos);

  // nvJitLink has its own variable; JITBRIDGE_NVRTC does not touch it.
  in.nvjitlink_env = base + "/nope.so";
  p = pick_library(CudaLibrary::nvjitlink, in, loader.fn());
  CHECK(p.component == "nvJitLink");
  CHECK(p.error.find("JITBRIDGE_NVJITLINK=" + base + "/nope.so: no such file") == 0);

  // Header directories that are not there.
  in.include_env = base + "/cuda-home/include:" + base + "/no-such-include";
  HeaderPicks h = pick_headers(in, ComponentPick{});
  CHECK_FALSE(h.cuda.found);
  CHECK_FALSE(h.cccl.found);
  CHECK(h.cuda.error.find("JITBRIDGE_CUDA_INCLUDE=") == 0);
  CHECK(h.cuda.error.find(base + "/no-such-include is not a directory") != std::string::npos);
  CHECK(h.include_dirs.empty());
}

TEST_CASE("cuda search: other CUDA majors are reported and skipped") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  FakeLoader loader;
  SearchInputs in = nothing(base);
  // A CUDA 12 toolkit in CUDA_HOME: only libnvrtc.so.12 there.
  toolkit(base + "/cuda12", "");
  put(base + "/cuda12/lib64/libnvrtc.so.12", "12.4");
  put(base + "/cuda12/lib64/libnvrtc.so.12.4.99", "12.4");
  in.cuda_home = base + "/cuda12";
  // A file named .so.13 that is in fact another major, in CUDA_PATH.
  in.cuda_path = toolkit(base + "/liar", "12.8");
  in.standard_root = toolkit(base + "/cuda13");
  ComponentPick p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  REQUIRE(p.found);
  CHECK(p.rule == base + "/cuda13");
  REQUIRE(p.tried.size() == 3);
  CHECK(p.tried[1].rule == "CUDA_HOME");
  CHECK(p.tried[1].why.find("no libnvrtc.so.13 in lib64, lib or targets/") == 0);
  CHECK(p.tried[1].why.find("libnvrtc.so.12 is another CUDA major (jitbridge needs 13)") != std::string::npos);
  CHECK(p.tried[2].rule == "CUDA_PATH");
  CHECK(p.tried[2].path == base + "/liar/lib64/libnvrtc.so.13");
  CHECK(p.tried[2].why == "is NVRTC 12.8; jitbridge needs 13");
  // The loader path, too: a libnvrtc.so.13 soname that reports 12.
  in.standard_root = base + "/none";
  loader.loader_path["libnvrtc.so.13"] = base + "/liar/lib64/libnvrtc.so.13";
  p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK_FALSE(p.found);
  CHECK(p.tried.back().rule == "loader path");
  CHECK(p.tried.back().why == "is NVRTC 12.8; jitbridge needs 13");
}

TEST_CASE("cuda search: a broken wheel copy is skipped for the next place") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  FakeLoader loader;
  SearchInputs in = nothing(base);
  std::string root = wheel(base + "/site");
  put(root + "/lib/libnvrtc.so.13", "bad");
  in.wheel_roots = {root};
  in.cuda_home = toolkit(base + "/cuda-home");
  ComponentPick p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  REQUIRE(p.found);
  CHECK(p.rule == "CUDA_HOME");
  REQUIRE(p.tried.size() == 2);
  CHECK(p.tried[1].path == root + "/lib/libnvrtc.so.13");
  CHECK(p.tried[1].why.find("could not be loaded: ") == 0);
}

TEST_CASE("cuda search: nothing found names what to install and every place searched") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  FakeLoader loader;
  SearchInputs in = nothing(base);
  in.wheel_roots = {wheel(base + "/site", false)};  // headers only (nvidia-cuda-runtime without nvrtc)
  ComponentPick p = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK_FALSE(p.found);
  CHECK(p.error.empty());
  std::string msg = not_found_message(p);
  CHECK(msg.find("NVRTC was not found: pip install nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cccl, or "
                 "install the CUDA toolkit (searched: JITBRIDGE_NVRTC: not set; wheel nvidia-cuda-nvrtc in " +
                 base + "/site " + base + "/site/nvidia/cu13: no lib/libnvrtc.so.13; CUDA_HOME: not set") == 0);
  CHECK(msg.find("loader path libnvrtc.so.13: could not be loaded: libnvrtc.so.13: cannot open shared object file)") !=
        std::string::npos);
  ComponentPick j = pick_library(CudaLibrary::nvjitlink, in, loader.fn());
  CHECK(not_found_message(j).find("nvJitLink was not found: pip install nvidia-nvjitlink") == 0);
  // The headers are still found (from the wheel) without any NVRTC.
  HeaderPicks h = pick_headers(in, p);
  CHECK(h.cuda.found);
  CHECK(h.cuda.rule == "wheel nvidia-cuda-runtime in " + base + "/site");
  CHECK(h.cccl.rule == "wheel nvidia-cuda-cccl in " + base + "/site");
  CHECK(h.cuda.note.empty());
}

TEST_CASE("cuda search: headers come from NVRTC's own place first, each set on its own") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  FakeLoader loader;
  SearchInputs in = nothing(base);
  in.cuda_home = toolkit(base + "/cuda-home");
  std::string site = wheel(base + "/site", true, true, true);
  in.wheel_roots = {site};

  // NVRTC from CUDA_HOME (explicitly placed there by the loader stand-in): its headers win over the wheel's.
  ComponentPick nvrtc;
  nvrtc.found = true;
  nvrtc.rule = "CUDA_HOME";
  nvrtc.root = in.cuda_home.value();
  HeaderPicks h = pick_headers(in, nvrtc);
  CHECK(h.cuda.rule == "CUDA_HOME");
  CHECK(h.cuda.path == real(base + "/cuda-home/include"));
  CHECK(h.cccl.path == real(base + "/cuda-home/include/cccl"));
  CHECK(h.include_dirs == std::vector<std::string>{real(base + "/cuda-home/include"),
                                                   real(base + "/cuda-home/include/cccl")});

  // The mixed setup: JITBRIDGE_NVRTC at a copy of libnvrtc in a directory without headers.
  put(base + "/copy/lib/libnvrtc.so.13", "13.0");
  in.nvrtc_env = base + "/copy/lib/libnvrtc.so.13";
  nvrtc = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  REQUIRE(nvrtc.rule == "JITBRIDGE_NVRTC");
  h = pick_headers(in, nvrtc);
  CHECK(h.cuda.rule == "wheel nvidia-cuda-runtime in " + base + "/site");
  CHECK(h.cuda.note == "NVRTC's own place (" + base + "/copy) has no cuda_fp16.h");
  REQUIRE(h.cuda.tried.size() == 2);
  CHECK(h.cuda.tried[1].rule == "beside NVRTC (JITBRIDGE_NVRTC)");
  CHECK(h.cuda.tried[1].why == "no cuda_fp16.h there");

  // NVRTC from the wheel, whose place has the runtime headers but no CCCL (no nvidia-cuda-cccl):
  // cuda headers from the wheel, CCCL from the next place down the order.
  in.nvrtc_env.reset();
  std::string site2 = wheel(base + "/site2", true, true, false);
  in.wheel_roots = {site2};
  nvrtc = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  REQUIRE(nvrtc.rule == "wheel nvidia-cuda-nvrtc in " + base + "/site2");
  h = pick_headers(in, nvrtc);
  CHECK(h.cuda.rule == "wheel nvidia-cuda-runtime in " + base + "/site2");
  CHECK(h.cuda.note.empty());
  CHECK(h.cccl.rule == "CUDA_HOME");
  CHECK(h.cccl.note == "NVRTC's own place (" + site2 + ") has no cuda/std");
  CHECK(h.include_dirs == std::vector<std::string>{real(site2 + "/include"), real(base + "/cuda-home/include/cccl")});

  // JITBRIDGE_CUDA_INCLUDE comes first, for the sets it has; the others are still searched.
  put(base + "/my-include/cuda_fp16.h");
  in.include_env = base + "/my-include";
  h = pick_headers(in, nvrtc);
  CHECK(h.cuda.rule == "JITBRIDGE_CUDA_INCLUDE");
  CHECK(h.cuda.path == real(base + "/my-include"));
  CHECK(h.cccl.rule == "CUDA_HOME");
  CHECK(h.cccl.tried.front().why == "no cuda/std there");
}

TEST_CASE("cuda search: a place reached by two rules is looked into once") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  SearchInputs in = nothing(base);
  toolkit(base + "/cuda-13.0", "13.0", false);
  REQUIRE(::symlink((base + "/cuda-13.0").c_str(), (base + "/cuda").c_str()) == 0);
  in.cuda_home = base + "/cuda";
  in.standard_root = base + "/cuda";
  ComponentPick nvrtc;  // not found
  HeaderPicks h = pick_headers(in, nvrtc);
  CHECK_FALSE(h.cuda.found);
  // JITBRIDGE_CUDA_INCLUDE, CUDA_HOME, CUDA_PATH; the standard root is CUDA_HOME again.
  CHECK(h.cuda.tried.size() == 3);
}

TEST_CASE("cuda search: locating takes the first file of the order without loading it") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  FakeLoader loader;
  loader.loader_path["libnvrtc.so.13"] = base + "/ld/lib/libnvrtc.so.13";
  put(base + "/ld/lib/libnvrtc.so.13", "13.1");
  SearchInputs in = nothing(base);

  // A broken wheel copy comes first: located (no loading), while the loading search skips it.
  in.wheel_roots = {wheel(base + "/site")};
  put(base + "/site/nvidia/cu13/lib/libnvrtc.so.13", "bad");
  in.cuda_home = toolkit(base + "/cuda-home");
  ComponentPick located = locate_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK(loader.loaded.empty());
  REQUIRE(located.found);
  CHECK(located.rule == "wheel nvidia-cuda-nvrtc in " + base + "/site");
  CHECK(located.path == base + "/site/nvidia/cu13/lib/libnvrtc.so.13");
  CHECK(located.root == base + "/site/nvidia/cu13");
  CHECK(located.version.empty());
  ComponentPick loaded = pick_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK(loaded.rule == "CUDA_HOME");
  CHECK(loaded.version == "13.0");

  // The explicit setting: located by existence; a missing file is the same error as when loading.
  in.nvrtc_env = base + "/cuda-home/lib64/libnvrtc.so.13";
  located = locate_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK((located.found && located.rule == "JITBRIDGE_NVRTC" && located.path == *in.nvrtc_env));
  in.nvrtc_env = base + "/missing.so";
  located = locate_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK_FALSE(located.found);
  CHECK(located.error == pick_library(CudaLibrary::nvrtc, in, loader.fn()).error);
  in.nvrtc_env.reset();

  // Only the loader-path rule needs the loader (a soname is resolved by nothing else).
  in.wheel_roots.clear();
  in.cuda_home.reset();
  loader.loaded.clear();
  located = locate_library(CudaLibrary::nvrtc, in, loader.fn());
  CHECK(loader.loaded == std::vector<std::string>{"libnvrtc.so.13"});
  CHECK(located.rule == "loader path");
  CHECK(located.path == base + "/ld/lib/libnvrtc.so.13");
  CHECK(located.version == "13.1");
}

TEST_CASE("cuda search: a library's identity changes with its file") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  put(base + "/lib/libnvrtc.so.13", "13.0");
  REQUIRE(::symlink((base + "/lib/libnvrtc.so.13").c_str(), (base + "/link.so").c_str()) == 0);
  const std::string id = library_identity(base + "/lib/libnvrtc.so.13");
  CHECK(id.rfind(real(base + "/lib/libnvrtc.so.13") + " (4 bytes, mtime ", 0) == 0);
  CHECK(library_identity(base + "/link.so") == id);  // the file, not the name it was reached by
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 678}};
  REQUIRE(::utimensat(AT_FDCWD, (base + "/lib/libnvrtc.so.13").c_str(), times, 0) == 0);
  CHECK(library_identity(base + "/lib/libnvrtc.so.13") == real(base + "/lib/libnvrtc.so.13") +
                                                          " (4 bytes, mtime 12345.000000678)");
  CHECK(library_identity(base + "/gone.so") == base + "/gone.so");
}

TEST_CASE("cuda search: this process finds NVRTC and its headers") {
  // Whatever this process was given (JITBRIDGE_NVRTC, CUDA_HOME, CUDA_PATH set or not, a toolkit or none):
  // the test binary links no libnvrtc, so NVRTC, when found, came from the search.
  const ComponentPick& p = nvrtc_pick();
  CHECK_THROWS_AS(set_cuda_wheel_roots({"/elsewhere/nvidia/cu13"}), std::logic_error);
  if (!p.found) {
    CHECK_THROWS_AS(nvrtc_api(), CudaNotFoundError);
    return;
  }
  CHECK(nvrtc_api().major == 13);
  CHECK(nvrtc_load_attempted());
  CHECK_FALSE(p.rule.empty());
  // The located file is the loaded one, or one earlier in the order that proved unusable (tried, with the reason).
  const ComponentPick& located = nvrtc_located();
  REQUIRE(located.found);
  if (located.path != p.path) {
    bool skipped = false;
    for (const SearchStep& step : p.tried) skipped = skipped || (step.path == located.path && !step.why.empty());
    CHECK(skipped);
  }
  // Keys name the loaded file either way.
  CHECK(nvrtc_identity() == library_identity(p.path));
  CHECK(nvrtc_library() == nvrtc_identity());
  // Every header set found is passed to compiles.
  const HeaderPicks& h = cuda_header_picks();
  for (const ComponentPick* set : {&h.cuda, &h.cccl}) {
    if (!set->found) continue;
    CHECK(std::find(h.include_dirs.begin(), h.include_dirs.end(), set->path) != h.include_dirs.end());
  }
}

TEST_CASE("device runtime: JITBRIDGE_CUDADEVRT, then beside nvJitLink, then the usual order") {
  const TempDir temp("locator");
  const std::string& base = temp.path;
  SearchInputs in = nothing(base);
  ComponentPick none;  // nvJitLink not found

  // Nothing anywhere: not found, every place named.
  ComponentPick p = pick_device_runtime(in, none);
  CHECK_FALSE(p.found);
  CHECK(p.tried.size() == 4);  // JITBRIDGE_CUDADEVRT, CUDA_HOME, CUDA_PATH, the standard root
  CHECK(not_found_message(p).find("pip install nvidia-cuda-runtime") != std::string::npos);

  // The standard root: lib64, then lib, then targets/<platform>/lib.
  std::string std_root = base + "/cuda";
  mkdirs(std_root + "/lib");
  put(std_root + "/lib/libcudadevrt.a");
  in.standard_root = std_root;
  p = pick_device_runtime(in, none);
  REQUIRE(p.found);
  CHECK(p.path == real(std_root + "/lib/libcudadevrt.a"));
  mkdirs(std_root + "/lib64");
  put(std_root + "/lib64/libcudadevrt.a");
  CHECK(pick_device_runtime(in, none).path == real(std_root + "/lib64/libcudadevrt.a"));

  // A wheel (nvidia-cuda-runtime puts it in nvidia/cu13/lib) comes before the toolkits.
  std::string w = wheel(base + "/site", false, false, false);
  put(w + "/lib/libcudadevrt.a");
  in.wheel_roots = {w};
  p = pick_device_runtime(in, none);
  CHECK(p.path == real(w + "/lib/libcudadevrt.a"));
  CHECK(p.rule.find("wheel nvidia-cuda-runtime") == 0);

  // Beside nvJitLink comes before the wheels: its toolkit's targets/<platform>/lib.
  std::string tk = base + "/toolkit";
#if defined(__aarch64__)
  const std::string target_lib = tk + "/targets/sbsa-linux/lib";
#else
  const std::string target_lib = tk + "/targets/x86_64-linux/lib";
#endif
  mkdirs(target_lib);
  put(target_lib + "/libcudadevrt.a");
  ComponentPick nvjitlink;
  nvjitlink.found = true;
  nvjitlink.rule = "CUDA_HOME";
  nvjitlink.root = tk;
  p = pick_device_runtime(in, nvjitlink);
  CHECK(p.path == real(target_lib + "/libcudadevrt.a"));
  CHECK(p.rule == "beside nvJitLink (CUDA_HOME)");

  // nvJitLink's place without one: the order goes on to the wheel.
  ComponentPick empty_place = nvjitlink;
  empty_place.root = base + "/site";  // exists, holds no lib/libcudadevrt.a at its top
  p = pick_device_runtime(in, empty_place);
  CHECK(p.path == real(w + "/lib/libcudadevrt.a"));

  // The explicit setting wins, and a wrong one is an error without fallback.
  put(base + "/mine/libcudadevrt.a");
  in.cudadevrt_env = base + "/mine/libcudadevrt.a";
  p = pick_device_runtime(in, nvjitlink);
  CHECK(p.path == real(base + "/mine/libcudadevrt.a"));
  CHECK(p.rule == "JITBRIDGE_CUDADEVRT");
  in.cudadevrt_env = base + "/nope.a";
  p = pick_device_runtime(in, nvjitlink);
  CHECK_FALSE(p.found);
  CHECK(p.error.find("JITBRIDGE_CUDADEVRT=" + base + "/nope.a: no such file") == 0);
  in.cudadevrt_env = base + "/mine";
  p = pick_device_runtime(in, nvjitlink);
  CHECK(p.error.find("is not a file") != std::string::npos);
}
