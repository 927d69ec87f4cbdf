// driver.cpp — loads libcuda.so.1 with dlopen and fills the DriverApi table through cuGetProcAddress.
#include "jitbridge/driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>
#include <mutex>

namespace jitbridge {
namespace {

struct Loaded {
  DriverApi api;
  bool ok = false;
  std::string why;  // reason when !ok
};

// Entries an older driver may lack; the rest must resolve or the driver counts as unusable.
bool is_optional(const char* name) {
  static const char* const optional[] = {"cuKernelGetParamInfo", "cuLibraryGetKernelCount",
                                        "cuLibraryEnumerateKernels"};
  for (const char* o : optional)
    if (std::strcmp(o, name) == 0) return true;
  return false;
}

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

Loaded load() {
  Loaded out;
  // Never dlclose'd: kernels, contexts and other libraries keep using it until exit.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    out.why = fmt::format("no CUDA driver was found (libcuda.so.1 could not be loaded: {})",
                          err ? err : "unknown reason");
    return out;
  }
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    out.why = "no usable CUDA driver was found (libcuda.so.1 has no cuGetProcAddress_v2; "
              "the driver is older than CUDA 12)";
    return out;
  }
  std::string missing;
  // #name stringifies the unexpanded name ("cuMemAlloc"), which is what cuGetProcAddress wants;
  // the member itself is the versioned one cuda.h maps the name to (cuMemAlloc_v2).
#define JITBRIDGE_DRIVER_ENTRY(name, version)                                                \
  {                                                                                          \
    void* fn = nullptr;                                                                      \
    CUdriverProcAddressQueryResult status{};                                                 \
    if (get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==               \
            CUDA_SUCCESS &&                                                                  \
        fn)                                                                                  \
      out.api.name = reinterpret_cast<decltype(out.api.name)>(fn);                           \
    else if (!is_optional(#name))                                                            \
      missing += (missing.empty() ? "" : ", ") + std::string(#name);                         \
  }
#include "jitbridge/driver_entries.inc"
#undef JITBRIDGE_DRIVER_ENTRY
  if (!missing.empty()) {
    out.why = fmt::format("the CUDA driver is too old for jitbridge (missing: {})", missing);
    return out;
  }
  CUresult rc = out.api.cuInit(0);
  if (rc != CUDA_SUCCESS) {
    const char* name = nullptr;
    out.api.cuGetErrorName(rc, &name);
    out.why = fmt::format("no usable CUDA driver was found (cuInit failed: {})",
                          name ? name : std::to_string(static_cast<int>(rc)));
    return out;
  }
  out.api.cuDriverGetVersion(&out.api.version);
  out.ok = true;
  return out;
}

const Loaded& loaded() {
  static const Loaded instance = load();  // thread-safe one-time initialisation
  return instance;
}

}  // namespace

DriverError::DriverError(const char* call, CUresult code)
    : std::runtime_error([&] {
        const char* name = nullptr;
        const char* text = nullptr;
        if (const DriverApi* api = try_driver()) {
          api->cuGetErrorName(code, &name);
          api->cuGetErrorString(code, &text);
        }
        return fmt::format("{} failed: {} ({})", call, name ? name : "CUDA error",
                           text ? text : std::to_string(static_cast<int>(code)));
      }()),
      code_(code) {}

const DriverApi* try_driver(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok && why) *why = l.why;
  return l.ok ? &l.api : nullptr;
}

const DriverApi& driver() {
  const Loaded& l = loaded();
  if (!l.ok) throw NoDriverError(l.why);
  return l.api;
}

void check(CUresult code, const char* call) {
  if (code != CUDA_SUCCESS) throw DriverError(call, code);
}

}  // namespace jitbridge
