// environment.cpp — facts about this machine: NVRTC's version, the default target, toolkit headers, the driver and GPUs.
#include <fmt/format.h>

#include <string>

#include "bindings.hpp"
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

}  // namespace

void bind_environment(py::module_& m) {
  m.def("nvrtc_version", &nvrtc_version, "NVRTC's version as (major, minor).");
  m.def("nvrtc_library", [] { return text(nvrtc_library()); },
        "The NVRTC library in use: path, size and mtime (part of the cache key: two builds of one version differ).");
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
      "The CUDA toolkit include directories added to every compile (cuda_fp16.h lives there); [] if none "
      "was found.");
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
