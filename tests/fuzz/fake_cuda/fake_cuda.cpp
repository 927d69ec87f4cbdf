// fake_cuda.cpp — a stand-in libcuda.so.1 with made-up GPUs (one; FAKE_CUDA_DEVICES=n for up to 8), so that fuzzed launches reach validate_launch and a recorded cuLaunchKernel on a machine without one.
// Only what jitbridge asks is implemented. Allocations get made-up addresses; the bytes behind them exist only once a
// copy or memset touches them (host memory of the allocation's size), so copies and memsets work on what was allocated.
#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fake_cuda.h"
#include "fake_params.h"

namespace {

using namespace fake_cuda;

// pointer_form fills what was padding: FakeCudaLaunch kept its layout, so ctypes mirrors without it read it right.
static_assert(offsetof(FakeCudaLaunch, pointer_form) + sizeof(int) == offsetof(FakeCudaLaunch, param_bytes) &&
              offsetof(FakeCudaLaunch, param_bytes) == 64, "FakeCudaLaunch's layout changed");

std::mutex g_mutex;
FakeCudaLaunch g_last{};
thread_local CUcontext t_current = nullptr;
thread_local CUcontext t_stack[64];
thread_local int t_depth = 0;
int g_last_device = -1;  // the device whose context was current at the last launch
char g_context_storage[kMaxDevices];  // device d's primary context is g_context_storage + d
CUcontext context_of(int device) { return reinterpret_cast<CUcontext>(g_context_storage + device); }
CUcontext context0() { return context_of(0); }
// The device of a context of ours, or -1.
int device_of(CUcontext c) {
  const char* p = reinterpret_cast<const char*>(c);
  return p >= g_context_storage && p < g_context_storage + kMaxDevices ? static_cast<int>(p - g_context_storage) : -1;
}
// How many GPUs: FAKE_CUDA_DEVICES (1 to kMaxDevices), else 1.
int device_count() {
  static const int n = [] {
    const char* v = std::getenv("FAKE_CUDA_DEVICES");
    const int asked = v ? std::atoi(v) : 1;
    return asked >= 1 && asked <= kMaxDevices ? asked : 1;
  }();
  return n;
}
std::atomic<std::uintptr_t> g_next_handle{0x10000};
std::atomic<std::uint64_t> g_next_address{0x7f0000000000ull};

template <class T>
T new_handle() {
  return reinterpret_cast<T>(g_next_handle.fetch_add(16));
}

// Streams made by cuStreamCreate (live) and destroyed by cuStreamDestroy; handles are never reused, so a
// destroyed handle stays recognisable. Any later use of one aborts the process with a message on stderr
// (FAKE_CUDA_STALE_STREAMS=count counts it instead, for fake_cuda_stale_stream_uses()). Handles this
// driver never made (the special 0/1/2, fuzzed ints) are accepted as before.
struct StreamBook {
  std::mutex mutex;
  std::unordered_set<std::uintptr_t> live, destroyed;
  std::unordered_set<std::uint64_t> allocations;  // cuMemAlloc / cuMemAllocAsync addresses not yet freed
  long stale_uses = 0;
};
StreamBook& book() {
  static auto* b = new StreamBook();
  return *b;
}
// CUDA_SUCCESS, or CUDA_ERROR_INVALID_HANDLE for a destroyed stream (after aborting, unless counting).
CUresult check_stream(CUstream s, const char* fn) {
  StreamBook& b = book();
  std::lock_guard<std::mutex> lock(b.mutex);
  if (!b.destroyed.count(reinterpret_cast<std::uintptr_t>(s))) return CUDA_SUCCESS;
  ++b.stale_uses;
  std::fprintf(stderr, "fake_cuda: %s used the destroyed stream %p\n", fn, static_cast<void*>(s));
  const char* mode = std::getenv("FAKE_CUDA_STALE_STREAMS");
  if (!mode || std::strcmp(mode, "count") != 0) std::abort();
  return CUDA_ERROR_INVALID_HANDLE;
}
#define FAKE_CHECK_STREAM(s)                                   \
  do {                                                         \
    if (CUresult rc_ = check_stream((s), __func__)) return rc_; \
  } while (0)

// Kernel handles: the name asked for, per handle.
std::unordered_map<std::uintptr_t, std::string>& kernel_names() {
  static auto* names = new std::unordered_map<std::uintptr_t, std::string>();
  return *names;
}
// Per library handle, its kernels' parameters (from the cubin); per kernel handle, its own (empty: unknown).
using ParamTable = std::map<std::string, std::vector<KernelParam>>;
std::unordered_map<std::uintptr_t, ParamTable>& library_params() {
  static auto* tables = new std::unordered_map<std::uintptr_t, ParamTable>();
  return *tables;
}
std::unordered_map<std::uintptr_t, std::vector<KernelParam>>& kernel_params() {
  static auto* params = new std::unordered_map<std::uintptr_t, std::vector<KernelParam>>();
  return *params;
}

CUresult fInit(unsigned) { return CUDA_SUCCESS; }
CUresult fDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult fGetErrorName(CUresult rc, const char** out) {
  *out = rc == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult fGetErrorString(CUresult, const char** out) {
  *out = "an error of the fake driver";
  return CUDA_SUCCESS;
}
CUresult fDeviceGetCount(int* n) {
  *n = device_count();
  return CUDA_SUCCESS;
}
CUresult fDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult fDeviceGetName(char* name, int len, CUdevice) {
  if (len > 0) std::strncpy(name, "Fake GPU (jitbridge fuzzing)", static_cast<std::size_t>(len) - 1)[len - 1] = '\0';
  return CUDA_SUCCESS;
}
CUresult fDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = kCcMajor; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = kCcMinor; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = kMaxThreadsPerBlock; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *v = kMaxBlockDim[0]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = kMaxBlockDim[1]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = kMaxBlockDim[2]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = kMaxGridDim[0]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *v = kMaxGridDim[1]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = kMaxGridDim[2]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = kMaxSharedPerBlock; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = kMaxSharedOptin; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult fDeviceTotalMem(std::size_t* bytes, CUdevice) {
  *bytes = std::size_t{80} << 30;
  return CUDA_SUCCESS;
}
CUresult fPrimaryCtxRetain(CUcontext* c, CUdevice d) {
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *c = context_of(d);
  return CUDA_SUCCESS;
}
CUresult fPrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult fCtxGetCurrent(CUcontext* c) {
  *c = t_current;
  return CUDA_SUCCESS;
}
CUresult fCtxSetCurrent(CUcontext c) {
  t_current = c;
  return CUDA_SUCCESS;
}
CUresult fCtxGetDevice(CUdevice* d) {
  if (device_of(t_current) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *d = device_of(t_current);
  return CUDA_SUCCESS;
}
CUresult fSuccess0() { return CUDA_SUCCESS; }
CUresult fCtxPush(CUcontext c) {
  if (t_depth == 64) return CUDA_ERROR_INVALID_VALUE;
  t_stack[t_depth++] = t_current;
  t_current = c;
  return CUDA_SUCCESS;
}
CUresult fCtxPop(CUcontext* out) {
  if (t_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (out) *out = t_current;
  t_current = t_stack[--t_depth];
  return CUDA_SUCCESS;
}
CUresult fLibraryLoadData(CUlibrary* lib, const void* image, CUjit_option*, void**, unsigned, CUlibraryOption*, void**,
                          unsigned) {
  ParamTable params = cubin_params(image);
  std::lock_guard<std::mutex> lock(g_mutex);
  *lib = new_handle<CUlibrary>();
  library_params()[reinterpret_cast<std::uintptr_t>(*lib)] = std::move(params);
  return CUDA_SUCCESS;
}
CUresult fLibraryUnload(CUlibrary) { return CUDA_SUCCESS; }
CUresult fLibraryGetKernel(CUkernel* k, CUlibrary lib, const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  *k = new_handle<CUkernel>();
  kernel_names()[reinterpret_cast<std::uintptr_t>(*k)] = name;
  const ParamTable& table = library_params()[reinterpret_cast<std::uintptr_t>(lib)];
  const auto it = table.find(name);
  if (it != table.end()) kernel_params()[reinterpret_cast<std::uintptr_t>(*k)] = it->second;
  return CUDA_SUCCESS;
}
CUresult fKernelGetName(const char** out, CUkernel k) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = kernel_names().find(reinterpret_cast<std::uintptr_t>(k));
  if (it == kernel_names().end()) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second.c_str();
  return CUDA_SUCCESS;
}
CUresult fKernelGetFunction(CUfunction* f, CUkernel k) {
  *f = reinterpret_cast<CUfunction>(k);
  return CUDA_SUCCESS;
}
int function_attribute(CUfunction_attribute a) {
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return kKernelMaxThreads;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: return kKernelStaticShared;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: return 32;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: return kMaxSharedOptin - kKernelStaticShared;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: return 90;
    default: return 0;
  }
}
CUresult fKernelGetAttribute(int* v, CUfunction_attribute a, CUkernel, CUdevice) {
  *v = function_attribute(a);
  return CUDA_SUCCESS;
}
CUresult fFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  *v = function_attribute(a);
  return CUDA_SUCCESS;
}
CUresult fKernelSetAttribute(CUfunction_attribute, int, CUkernel, CUdevice) { return CUDA_SUCCESS; }
CUresult fFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }

void record(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
            void** kernel_params_in, void** extra, const CUlaunchAttribute* attrs, unsigned n_attrs) {
  std::lock_guard<std::mutex> lock(g_mutex);
  FakeCudaLaunch& l = g_last;
  const std::uint64_t count = l.count + 1;
  std::memset(&l, 0, sizeof l);
  l.count = count;
  const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
  std::memcpy(l.grid, g, sizeof g);
  std::memcpy(l.block, b, sizeof b);
  l.shared_mem = shared;
  g_last_device = device_of(t_current);
  for (unsigned i = 0; i < n_attrs; ++i) {
    switch (attrs[i].id) {
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        l.cluster[0] = attrs[i].value.clusterDim.x;
        l.cluster[1] = attrs[i].value.clusterDim.y;
        l.cluster[2] = attrs[i].value.clusterDim.z;
        break;
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: l.cooperative = attrs[i].value.cooperative; break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        l.programmatic = attrs[i].value.programmaticStreamSerializationAllowed;
        break;
      default: break;
    }
  }
  const void* buffer = nullptr;
  std::size_t size = 0;
  for (int i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<std::size_t*>(extra[i + 1]);
  }
  if (buffer) {
    l.buffer_form = 1;
    l.param_bytes = size;
    std::memcpy(l.params, buffer, size < sizeof l.params ? size : sizeof l.params);
  } else if (kernel_params_in) {
    // As a driver does: parameter i's size (the cubin's) from kernelParams[i], at its offset; the gaps stay 0.
    l.pointer_form = 1;
    const auto it = kernel_params().find(reinterpret_cast<std::uintptr_t>(fn));  // CUfunction == CUkernel here
    if (it == kernel_params().end()) return;
    for (std::size_t i = 0; i < it->second.size(); ++i) {
      const KernelParam& p = it->second[i];
      if (p.offset + p.size > l.param_bytes) l.param_bytes = p.offset + p.size;
      if (p.offset < sizeof l.params)
        std::memcpy(l.params + p.offset, kernel_params_in[i],
                    p.size < sizeof l.params - p.offset ? p.size : sizeof l.params - p.offset);
    }
  }
}
CUresult fLaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shared, CUstream stream, void** params, void** extra) {
  FAKE_CHECK_STREAM(stream);
  record(fn, gx, gy, gz, bx, by, bz, shared, params, extra, nullptr, 0);
  return CUDA_SUCCESS;
}
CUresult fLaunchKernelEx(const CUlaunchConfig* c, CUfunction fn, void** params, void** extra) {
  FAKE_CHECK_STREAM(c->hStream);
  record(fn, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ, c->sharedMemBytes,
         params, extra, c->attrs, c->numAttrs);
  return CUDA_SUCCESS;
}
// Live allocations by address: their size, and their bytes once touched (sized then, filled with 0xA5; up to 1 GiB).
struct Allocation {
  std::size_t bytes = 0;
  std::vector<unsigned char> data;
};
std::mutex g_memory_mutex;
std::map<CUdeviceptr, Allocation> g_memory;
FakeCudaCopy g_last_copy{};
// The bytes [p, p + n) of one live allocation, or nullptr. g_memory_mutex held.
unsigned char* bytes_at(CUdeviceptr p, std::size_t n) {
  auto it = g_memory.upper_bound(p);
  if (it == g_memory.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  const std::size_t offset = p - it->first;
  if (offset > a.bytes || n > a.bytes - offset || a.bytes > (std::size_t{1} << 30)) return nullptr;  // 1 GiB at most
  if (a.data.size() != a.bytes) a.data.assign(a.bytes, 0xA5);
  return a.data.data() + offset;
}
CUresult fMemAlloc(CUdeviceptr* p, std::size_t bytes) {
  // 64 KiB steps, one at least: every live allocation has its own address (a zero-byte one too)
  *p = g_next_address.fetch_add(bytes ? (bytes + 0xffff) & ~std::uint64_t{0xffff} : 0x10000);
  {
    std::lock_guard<std::mutex> lock(book().mutex);
    book().allocations.insert(*p);
  }
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  g_memory[*p].bytes = bytes;
  return CUDA_SUCCESS;
}
CUresult fMemAllocAsync(CUdeviceptr* p, std::size_t bytes, CUstream s) {
  FAKE_CHECK_STREAM(s);
  return fMemAlloc(p, bytes);
}
// A free of an address not allocated (or freed twice) aborts: it is always a bug in the caller.
CUresult fMemFree(CUdeviceptr p) {
  if (p == 0) return CUDA_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(book().mutex);
    if (book().allocations.erase(p) == 0) {
      std::fprintf(stderr, "fake_cuda: free of %#llx, which is not allocated\n", static_cast<unsigned long long>(p));
      std::abort();
    }
  }
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  g_memory.erase(p);
  return CUDA_SUCCESS;
}
CUresult fMemFreeAsync(CUdeviceptr p, CUstream s) {
  FAKE_CHECK_STREAM(s);
  return fMemFree(p);
}
CUresult fNotSupported() { return CUDA_ERROR_NOT_SUPPORTED; }
// One copy (kind 1: host to device, 2: device to host, 3: device to device) of allocated memory.
CUresult copy(int kind, void* dst_host, CUdeviceptr dst, const void* src_host, CUdeviceptr src, std::size_t n,
              CUstream stream) {
  FAKE_CHECK_STREAM(stream);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  unsigned char* to = dst_host ? static_cast<unsigned char*>(dst_host) : bytes_at(dst, n);
  const unsigned char* from = src_host ? static_cast<const unsigned char*>(src_host) : bytes_at(src, n);
  if (!to || !from) return CUDA_ERROR_INVALID_VALUE;
  if (n) std::memmove(to, from, n);
  ++g_last_copy.count;
  g_last_copy.kind = kind;
  g_last_copy.bytes = n;
  g_last_copy.stream = reinterpret_cast<std::uintptr_t>(stream);
  return CUDA_SUCCESS;
}
CUresult fMemcpyHtoDAsync(CUdeviceptr dst, const void* src, std::size_t n, CUstream s) {
  return copy(1, nullptr, dst, src, 0, n, s);
}
CUresult fMemcpyDtoHAsync(void* dst, CUdeviceptr src, std::size_t n, CUstream s) {
  return copy(2, dst, 0, nullptr, src, n, s);
}
CUresult fMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s) {
  return copy(3, nullptr, dst, nullptr, src, n, s);
}
CUresult fMemsetD8Async(CUdeviceptr p, unsigned char v, std::size_t n, CUstream s) {
  FAKE_CHECK_STREAM(s);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  if (unsigned char* to = bytes_at(p, n)) std::memset(to, v, n);  // memory never touched needs nothing
  return CUDA_SUCCESS;
}
CUresult fStreamSynchronize(CUstream s) {
  FAKE_CHECK_STREAM(s);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  ++g_last_copy.syncs;
  g_last_copy.synced_stream = reinterpret_cast<std::uintptr_t>(s);
  return CUDA_SUCCESS;
}
CUresult fMemGetInfo(std::size_t* free_bytes, std::size_t* total) {
  *free_bytes = std::size_t{40} << 30;
  *total = std::size_t{80} << 30;
  return CUDA_SUCCESS;
}
CUresult fEventCreate(CUevent* e, unsigned) {
  *e = new_handle<CUevent>();
  return CUDA_SUCCESS;
}
CUresult fEventElapsed(float* ms, CUevent, CUevent) {
  *ms = 0;
  return CUDA_SUCCESS;
}
CUresult fEventRecord(CUevent, CUstream s) {
  FAKE_CHECK_STREAM(s);
  return CUDA_SUCCESS;
}
CUresult fStreamWaitEvent(CUstream s, CUevent, unsigned) {
  FAKE_CHECK_STREAM(s);
  return CUDA_SUCCESS;
}
CUresult fStreamCreate(CUstream* s, unsigned) {
  *s = new_handle<CUstream>();
  std::lock_guard<std::mutex> lock(book().mutex);
  book().live.insert(reinterpret_cast<std::uintptr_t>(*s));
  return CUDA_SUCCESS;
}
CUresult fStreamDestroy(CUstream s) {
  FAKE_CHECK_STREAM(s);
  std::lock_guard<std::mutex> lock(book().mutex);
  if (book().live.erase(reinterpret_cast<std::uintptr_t>(s))) book().destroyed.insert(reinterpret_cast<std::uintptr_t>(s));
  return CUDA_SUCCESS;
}
CUresult fStreamUse(CUstream s) {  // cuStreamQuery
  FAKE_CHECK_STREAM(s);
  return CUDA_SUCCESS;
}
CUresult fStreamGetCtx(CUstream s, CUcontext* c) {
  FAKE_CHECK_STREAM(s);
  *c = context0();
  return CUDA_SUCCESS;
}
CUresult fStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* s) {
  FAKE_CHECK_STREAM(stream);
  *s = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult fPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr) {
  if (a == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
    *static_cast<int*>(data) = 0;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult fLibraryGetGlobal(CUdeviceptr*, std::size_t*, CUlibrary, const char*) { return CUDA_ERROR_NOT_FOUND; }
CUresult fOccupancyBlockSize(int* min_grid, int* block, CUfunction, CUoccupancyB2DSize, std::size_t, int) {
  *min_grid = 132;
  *block = kKernelMaxThreads;
  return CUDA_SUCCESS;
}
CUresult fOccupancyBlocks(int* n, CUfunction, int, std::size_t) {
  *n = 2;
  return CUDA_SUCCESS;
}

struct Entry {
  const char* name;
  void* fn;
};
#define FAKE(name, fn) {#name, reinterpret_cast<void*>(fn)}
// Entries without an exact signature here (fSuccess0, fNotSupported) ignore their arguments.
const Entry kEntries[] = {
    FAKE(cuInit, fInit), FAKE(cuDriverGetVersion, fDriverGetVersion), FAKE(cuGetErrorName, fGetErrorName),
    FAKE(cuGetErrorString, fGetErrorString), FAKE(cuDeviceGetCount, fDeviceGetCount), FAKE(cuDeviceGet, fDeviceGet),
    FAKE(cuDeviceGetName, fDeviceGetName), FAKE(cuDeviceGetAttribute, fDeviceGetAttribute),
    FAKE(cuDeviceTotalMem, fDeviceTotalMem), FAKE(cuDevicePrimaryCtxRetain, fPrimaryCtxRetain),
    FAKE(cuDevicePrimaryCtxRelease, fPrimaryCtxRelease), FAKE(cuCtxGetCurrent, fCtxGetCurrent),
    FAKE(cuCtxSetCurrent, fCtxSetCurrent), FAKE(cuCtxGetDevice, fCtxGetDevice), FAKE(cuCtxSynchronize, fSuccess0),
    FAKE(cuLibraryLoadData, fLibraryLoadData), FAKE(cuLibraryUnload, fLibraryUnload),
    FAKE(cuLibraryGetKernel, fLibraryGetKernel), FAKE(cuKernelGetFunction, fKernelGetFunction),
    FAKE(cuKernelGetAttribute, fKernelGetAttribute), FAKE(cuFuncGetAttribute, fFuncGetAttribute),
    FAKE(cuLaunchKernel, fLaunchKernel), FAKE(cuLaunchKernelEx, fLaunchKernelEx), FAKE(cuMemAlloc, fMemAlloc),
    FAKE(cuMemFree, fMemFree), FAKE(cuMemcpyHtoD, fNotSupported), FAKE(cuMemcpyDtoH, fNotSupported),
    FAKE(cuStreamSynchronize, fStreamSynchronize), FAKE(cuCtxPushCurrent, fCtxPush), FAKE(cuCtxPopCurrent, fCtxPop),
    FAKE(cuMemAllocAsync, fMemAllocAsync), FAKE(cuMemFreeAsync, fMemFreeAsync),
    FAKE(cuMemsetD8Async, fMemsetD8Async), FAKE(cuMemcpyDtoDAsync, fMemcpyDtoDAsync),
    FAKE(cuMemcpyHtoDAsync, fMemcpyHtoDAsync), FAKE(cuMemcpyDtoHAsync, fMemcpyDtoHAsync), FAKE(cuMemGetInfo, fMemGetInfo),
    FAKE(cuEventCreate, fEventCreate), FAKE(cuEventRecord, fEventRecord), FAKE(cuEventDestroy, fSuccess0),
    FAKE(cuEventSynchronize, fSuccess0), FAKE(cuEventQuery, fSuccess0), FAKE(cuEventElapsedTime, fEventElapsed),
    FAKE(cuStreamWaitEvent, fStreamWaitEvent), FAKE(cuStreamCreate, fStreamCreate),
    FAKE(cuStreamDestroy, fStreamDestroy), FAKE(cuStreamQuery, fStreamUse), FAKE(cuStreamGetCtx, fStreamGetCtx),
    FAKE(cuStreamIsCapturing, fStreamIsCapturing), FAKE(cuPointerGetAttribute, fPointerGetAttribute),
    FAKE(cuKernelSetAttribute, fKernelSetAttribute), FAKE(cuFuncSetAttribute, fFuncSetAttribute),
    FAKE(cuLibraryGetGlobal, fLibraryGetGlobal), FAKE(cuKernelGetName, fKernelGetName),
    FAKE(cuOccupancyMaxPotentialBlockSize, fOccupancyBlockSize),
    FAKE(cuOccupancyMaxActiveBlocksPerMultiprocessor, fOccupancyBlocks),
    // cuKernelGetParamInfo, cuLibraryGetKernelCount, cuLibraryEnumerateKernels: absent (optional in jitbridge).
};
#undef FAKE

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t,
                                                                     CUdriverProcAddressQueryResult* status) {
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.name, symbol) == 0) {
      *pfn = e.fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *pfn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) void fake_cuda_last_launch(FakeCudaLaunch* out) {
  std::lock_guard<std::mutex> lock(g_mutex);
  *out = g_last;
}

__attribute__((visibility("default"))) std::uintptr_t fake_cuda_stream_create() {
  CUstream s = nullptr;
  fStreamCreate(&s, 0);
  return reinterpret_cast<std::uintptr_t>(s);
}

__attribute__((visibility("default"))) int fake_cuda_stream_destroy(std::uintptr_t s) {
  return static_cast<int>(fStreamDestroy(reinterpret_cast<CUstream>(s)));
}

__attribute__((visibility("default"))) long fake_cuda_live_streams() {
  std::lock_guard<std::mutex> lock(book().mutex);
  return static_cast<long>(book().live.size());
}

__attribute__((visibility("default"))) long fake_cuda_stale_stream_uses() {
  std::lock_guard<std::mutex> lock(book().mutex);
  return book().stale_uses;
}

__attribute__((visibility("default"))) long fake_cuda_live_allocations() {
  std::lock_guard<std::mutex> lock(book().mutex);
  return static_cast<long>(book().allocations.size());
}

__attribute__((visibility("default"))) void fake_cuda_last_copy(FakeCudaCopy* out) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  *out = g_last_copy;
}

__attribute__((visibility("default"))) int fake_cuda_last_launch_device() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_last_device;
}

}  // extern "C"
