// jitbridge/nvjitlink_api.hpp — the nvJitLink entry points, a table filled from the libnvJitLink that the run-time search picked.
#pragma once

#ifndef NVJITLINK_NO_INLINE
#define NVJITLINK_NO_INLINE  // the header's static inline wrappers would name the versioned exports directly
#endif
#include <nvJitLink.h>  // types and prototypes only: nothing links libnvJitLink

#include <string>

namespace jitbridge {

// X-macro list of the nvJitLink functions jitbridge calls. Each is looked up by its CUDA 13.0 versioned
// export (nvJitLink.h's nvJitLinkCreate is an inline wrapper around __nvJitLinkCreate_13_0): the suffix
// pins the ABI, as the driver table pins PFN_*_v* versions. The pointer types are written here from the
// 13.0 prototypes rather than taken from the header's declarations, which name the version of whichever
// nvJitLink.h the build finds (a 13.5 wheel declares only __nvJitLinkCreate_13_5).
#define JITBRIDGE_NVJITLINK_ENTRIES(X)                                                                   \
  X(Create) X(Destroy) X(AddData) X(AddFile) X(Complete) X(GetLinkedCubinSize) X(GetLinkedCubin)         \
  X(GetLinkedPtxSize) X(GetLinkedPtx) X(GetErrorLogSize) X(GetErrorLog) X(GetInfoLogSize) X(GetInfoLog)

// One pointer per entry: api.Create(&handle, n, argv).
struct NvJitLinkApi {
  nvJitLinkResult (*Create)(nvJitLinkHandle* handle, uint32_t num_options, const char* const* options) = nullptr;
  nvJitLinkResult (*Destroy)(nvJitLinkHandle* handle) = nullptr;
  nvJitLinkResult (*AddData)(nvJitLinkHandle handle, nvJitLinkInputType type, const void* data, size_t size,
                             const char* name) = nullptr;
  nvJitLinkResult (*AddFile)(nvJitLinkHandle handle, nvJitLinkInputType type, const char* file_name) = nullptr;
  nvJitLinkResult (*Complete)(nvJitLinkHandle handle) = nullptr;
  nvJitLinkResult (*GetLinkedCubinSize)(nvJitLinkHandle handle, size_t* size) = nullptr;
  nvJitLinkResult (*GetLinkedCubin)(nvJitLinkHandle handle, void* cubin) = nullptr;
  nvJitLinkResult (*GetLinkedPtxSize)(nvJitLinkHandle handle, size_t* size) = nullptr;
  nvJitLinkResult (*GetLinkedPtx)(nvJitLinkHandle handle, char* ptx) = nullptr;
  nvJitLinkResult (*GetErrorLogSize)(nvJitLinkHandle handle, size_t* size) = nullptr;
  nvJitLinkResult (*GetErrorLog)(nvJitLinkHandle handle, char* log) = nullptr;
  nvJitLinkResult (*GetInfoLogSize)(nvJitLinkHandle handle, size_t* size) = nullptr;
  nvJitLinkResult (*GetInfoLog)(nvJitLinkHandle handle, char* log) = nullptr;
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
