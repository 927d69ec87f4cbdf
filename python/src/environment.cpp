// environment.cpp — facts about this machine: NVRTC's version, where CUDA was found, the default target, the driver and GPUs.
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/driver.hpp"

namespace jitbridge::python {
namespace {

py::dict device_info(const DriverApi& api, int ordinal) {
  CUdevice dev = 0;
  check(api.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  char name[256] = {};
  check(api.cuDeviceGetName(name, static_cast<int>(sizeof name) - 1, dev), "cuDeviceGetName");
  int major = 0, minor = 0;
  check(api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
        "cuDeviceGetAttribute");
  check(api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
        "cuDeviceGetAttribute");
  std::size_t memory = 0;
  check(api.cuDeviceTotalMem(&memory, dev), "cuDeviceTotalMem");
  py::dict d;
  d["ordinal"] = ordinal;
  d["name"] = text(name);
  d["compute_capability"] = fmt::format("{}.{}", major, minor);
  d["arch"] = fmt::format("sm_{}{}", major, minor);
  d["total_memory"] = memory;
  return d;
}

py::dict driver_info() {
  std::string why;
  const DriverApi* api = nullptr;
  {
    py::gil_scoped_release release;  // the first call loads libcuda and runs cuInit
    api = try_driver(&why);
  }
  py::dict d;
  d["found"] = api != nullptr;
  d["reason"] = api ? py::object(py::none()) : py::object(text(why));
  d["version"] = api ? py::object(py::int_(api->version)) : py::object(py::none());
  py::list devices;
  if (api) {
    int count = 0;
    check(api->cuDeviceGetCount(&count), "cuDeviceGetCount");
    for (int i = 0; i < count; ++i) devices.append(device_info(*api, i));
  }
  d["devices"] = devices;
  return d;
}

py::object text_or_none(const std::string& s) { return s.empty() ? py::object(py::none()) : py::object(text(s)); }

py::dict pick_dict(const ComponentPick& pick) {
  py::dict d;
  d["found"] = pick.found;
  d["path"] = text_or_none(pick.path);
  d["rule"] = text_or_none(pick.rule);
  d["version"] = text_or_none(pick.version);
  d["note"] = text_or_none(pick.note);
  d["error"] = text_or_none(pick.error);
  py::list tried;
  for (const SearchStep& step : pick.tried) {
    py::dict t;
    t["rule"] = text(step.rule);
    t["path"] = text_or_none(step.path);
    t["why"] = text(step.why);
    tried.append(t);
  }
  d["tried"] = tried;
  return d;
}

// libcuda is never searched: the loader's libcuda.so.1 is the driver (cuda/src/driver.cpp).
py::dict libcuda_dict() {
  std::string why;
  const DriverApi* api = nullptr;
  {
    py::gil_scoped_release release;
    api = try_driver(&why);
  }
  py::dict d;
  d["found"] = api != nullptr;
  d["rule"] = text("loader path");
  Dl_info info{};
  d["path"] = api && ::dladdr(reinterpret_cast<void*>(api->cuInit), &info) && info.dli_fname
                  ? py::object(text(info.dli_fname))
                  : py::object(py::none());
  d["version"] = api ? py::object(text(fmt::format("{}.{}", api->version / 1000, (api->version % 1000) / 10)))
                     : py::object(py::none());
  d["note"] = py::none();
  d["error"] = api ? py::object(py::none()) : py::object(text(why));
  d["tried"] = py::list();  // one place only: `error` says why it failed
  return d;
}

py::dict cuda_search() {
  const ComponentPick* nvrtc = nullptr;
  const ComponentPick* nvjitlink = nullptr;
  const HeaderPicks* headers = nullptr;
  const ComponentPick* devrt = nullptr;
  {
    py::gil_scoped_release release;  // the first call loads NVRTC and nvJitLink
    nvrtc = &nvrtc_pick();
    nvjitlink = &nvjitlink_pick();
    headers = &cuda_header_picks();
    devrt = &device_runtime_pick();
  }
  py::dict d;
  py::list roots;
  for (const std::string& r : cuda_wheel_roots()) roots.append(text(r));
  d["wheel_roots"] = roots;
  d["nvrtc"] = pick_dict(*nvrtc);
  d["nvjitlink"] = pick_dict(*nvjitlink);
  d["device_runtime"] = pick_dict(*devrt);
  d["cuda_headers"] = pick_dict(headers->cuda);
  d["cccl_headers"] = pick_dict(headers->cccl);
  py::list dirs;
  for (const std::string& dir : headers->include_dirs) dirs.append(text(dir));
  d["include_dirs"] = dirs;
  d["libcuda"] = libcuda_dict();
  return d;
}

}  // namespace

void bind_environment(py::module_& m) {
  m.def("nvrtc_version", &nvrtc_version,
        "NVRTC's version as (major, minor). Raises CudaNotFoundError when no NVRTC 13 was found.");
  m.def("nvrtc_library", [] { return text(nvrtc_library()); },
        "The NVRTC library in use: path, size and mtime (part of the cache key: two builds of one version differ). "
        "Raises CudaNotFoundError when none was found.");
  m.def(
      "default_arch",
      [] {
        py::gil_scoped_release release;
        return default_arch();
      },
      "The target compile() uses when arch is None: the current GPU's 'sm_XY' if a driver and a GPU are "
      "present, else $JITBRIDGE_ARCH, else 'sm_90'.");
  m.def(
      "toolkit_include_dirs",
      [] {
        py::list out;
        for (const std::string& dir : toolkit_include_dirs()) out.append(text(dir));
        return out;
      },
      "The CUDA include directories added to every compile (cuda_fp16.h, cuda/std/...: from NVRTC's place, a "
      "wheel or a toolkit; see python -m jitbridge doctor); [] if none was found.");
  m.def(
      "_set_wheel_roots",
      [](const py::list& roots) {
        std::vector<std::string> dirs;
        for (py::handle r : roots) dirs.push_back(r.cast<std::string>());  // str only: TypeError otherwise
        set_cuda_wheel_roots(std::move(dirs));
      },
      py::arg("roots"),
      "The <site-packages>/nvidia/cu13 directories of this environment, in sys.path order, for the CUDA search "
      "(called by jitbridge/__init__.py before anything is loaded). RuntimeError once a search ran with others.");
  m.def("_cuda_search", &cuda_search,
        R"(Where this process's CUDA components came from (runs the searches, loading NVRTC and nvJitLink, once):
a dict with wheel_roots, include_dirs (what every compile gets as -I) and, for each of nvrtc, nvjitlink,
cuda_headers, cccl_headers, libcuda, a dict: found, path, rule (what picked it: "JITBRIDGE_NVRTC",
"wheel nvidia-cuda-nvrtc in <site-packages>", "CUDA_HOME", "/usr/local/cuda", "loader path", ...), version,
note, error (an explicit setting that is wrong) and tried (the places tried before, each a dict of rule,
path, why). Never raises for what is missing.)");
  m.def("driver_info", &driver_info,
        R"(The CUDA driver and its GPUs, as a dict:
found    whether a usable driver was loaded (libcuda.so.1, cuInit).
reason   why not, when found is False; else None.
version  the driver's CUDA version as an int (13000 for 13.0), or None.
devices  one dict per GPU: ordinal, name, compute_capability ("9.0"), arch ("sm_90"),
         total_memory (bytes).
Raises DriverError if the driver fails while being asked about its devices.)");
}

}  // namespace jitbridge::python
