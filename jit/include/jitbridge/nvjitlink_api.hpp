// jitbridge/nvjitlink_api.hpp — the nvJitLink entry points, a table filled from the libnvJitLink that the run-time search picked.
#pragma once

#ifndef NVJITLINK_NO_INLINE
#define NVJITLINK_NO_INLINE  // the header's static inline wrappers would name the versioned exports directly
#endif
#include <nvJitLink.h>  // types and prototypes only: nothing links libnvJitLink

#include <string>

namespace jitbridge {

// X-macro list of the nvJitLink functions jitbridge calls, by their CUDA 13.0 versioned export
// (nvJitLink.h's nvJitLinkCreate is an inline wrapper around __nvJitLinkCreate_13_0): the suffix
// pins the ABI, as the driver table pins PFN_*_v* versions.
#define JITBRIDGE_NVJITLINK_ENTRIES(X)                                                                   \
  X(Create) X(Destroy) X(AddData) X(AddFile) X(Complete) X(GetLinkedCubinSize) X(GetLinkedCubin)         \
  X(GetLinkedPtxSize) X(GetLinkedPtx) X(GetErrorLogSize) X(GetErrorLog) X(GetInfoLogSize) X(GetInfoLog)

// One pointer per entry, typed from nvJitLink.h: api.Create(&handle, n, argv).
struct NvJitLinkApi {
#define JITBRIDGE_NVJITLINK_MEMBER(name) decltype(&::__nvJitLink##name##_13_0) name = nullptr;
  JITBRIDGE_NVJITLINK_ENTRIES(JITBRIDGE_NVJITLINK_MEMBER)
#undef JITBRIDGE_NVJITLINK_MEMBER
  int major = 0, minor = 0;  // the library's version
};

// The table, loaded on first use (thread-safe; the library is never unloaded). Throws
// CudaNotFoundError (jitbridge/cuda_search.hpp) when no usable nvJitLink 13 was found, naming what
// to install and each place searched, or the explicit setting (JITBRIDGE_NVJITLINK) that is wrong.
const NvJitLinkApi& nvjitlink_api();

// The identity (library_identity: real path, size, mtime) of the nvJitLink that links in this
// process; enters the cache key of every link. Loads it; throws CudaNotFoundError like nvjitlink_api().
const std::string& nvjitlink_identity();

}  // namespace jitbridge
