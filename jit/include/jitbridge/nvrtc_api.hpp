// jitbridge/nvrtc_api.hpp — the NVRTC entry points, a table filled from the libnvrtc that the run-time search picked.
#pragma once

#include <nvrtc.h>  // types and prototypes only: nothing links libnvrtc

namespace jitbridge {

// X-macro list of the NVRTC functions jitbridge calls.
#define JITBRIDGE_NVRTC_ENTRIES(X)                                                                 \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)             \
  X(nvrtcAddNameExpression) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcGetLoweredName)  \
  X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs) X(nvrtcGetLTOIRSize) X(nvrtcGetLTOIR)

// Entry points looked up optionally: nullptr when the library lacks them (precompiled headers are
// then not used automatically; jit/src/pch.cpp).
#define JITBRIDGE_NVRTC_OPTIONAL_ENTRIES(X)                                                  \
  X(nvrtcGetPCHCreateStatus) X(nvrtcGetPCHHeapSize) X(nvrtcSetPCHHeapSize) X(nvrtcGetPCHHeapSizeRequired)

// One pointer per entry, typed from nvrtc.h: api.nvrtcCompileProgram(prog, n, argv).
struct NvrtcApi {
#define JITBRIDGE_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  JITBRIDGE_NVRTC_ENTRIES(JITBRIDGE_NVRTC_MEMBER)
  JITBRIDGE_NVRTC_OPTIONAL_ENTRIES(JITBRIDGE_NVRTC_MEMBER)
#undef JITBRIDGE_NVRTC_MEMBER
  int major = 0, minor = 0;  // the library's version
};

// The table, loaded on first use (thread-safe; the library is never unloaded). Throws
// CudaNotFoundError (jitbridge/cuda_search.hpp) when no usable NVRTC 13 was found, naming what to
// install and each place searched, or the explicit setting that is wrong.
const NvrtcApi& nvrtc_api();

}  // namespace jitbridge
