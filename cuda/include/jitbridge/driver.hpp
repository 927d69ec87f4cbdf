// jitbridge/driver.hpp — the CUDA Driver API, loaded at run time from libcuda.so.1 (never linked).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <stdexcept>
#include <string>

namespace jitbridge {

// No usable CUDA driver on this machine (libcuda.so.1 missing, or cuInit failed).
class NoDriverError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A driver call failed. code() is the CUresult; what() names the call and the driver's text.
class DriverError : public std::runtime_error {
 public:
  DriverError(const char* call, CUresult code);
  CUresult code() const noexcept { return code_; }

 private:
  CUresult code_;
};

// One table of driver entry points, filled once through cuGetProcAddress. Every entry is
// non-null once driver() returned; the table lives for the whole process (never unloaded).
struct DriverApi {
#define JITBRIDGE_DRIVER_ENTRY(name, version) PFN_##name##_v##version name = nullptr;
#include "jitbridge/driver_entries.inc"
#undef JITBRIDGE_DRIVER_ENTRY
  int version = 0;  // cuDriverGetVersion, e.g. 13000
};

// The loaded and initialised driver. Throws NoDriverError, with the reason, when there is none.
// Thread-safe; the first call loads the library and calls cuInit(0).
const DriverApi& driver();

// The driver if it can be loaded, else nullptr (never throws). `why`, if given, receives the reason.
const DriverApi* try_driver(std::string* why = nullptr);

// Throws DriverError when `code` is not CUDA_SUCCESS.
void check(CUresult code, const char* call);

}  // namespace jitbridge
