// fake_cuda.h — what the fake libcuda.so.1 (fake_cuda.cpp) pretends to be, how a fuzz target reads its launches, and the streams and allocations it tracks.
#pragma once

#include <cstddef>
#include <cstdint>

// The made-up GPUs (one, or FAKE_CUDA_DEVICES of them, at most kMaxDevices): sm_90 devices with H100-like limits. The reference validators use these
// constants; jitbridge reads them through cuDeviceGetAttribute like any driver's.
namespace fake_cuda {
constexpr int kMaxDevices = 8;
constexpr int kCcMajor = 9, kCcMinor = 0;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxBlockDim[3] = {1024, 1024, 64};
constexpr int kMaxGridDim[3] = {2147483647, 65535, 65535};
constexpr int kMaxSharedPerBlock = 48 * 1024;
constexpr int kMaxSharedOptin = 227 * 1024;
constexpr int kKernelMaxThreads = 1024;   // every kernel's CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
constexpr int kKernelStaticShared = 1024; // every kernel's CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
}  // namespace fake_cuda

// The last cuLaunchKernel / cuLaunchKernelEx call, as the driver received it.
struct FakeCudaLaunch {
  std::uint64_t count;  // launches so far
  unsigned grid[3], block[3], cluster[3];  // cluster all 0: no cluster attribute
  unsigned shared_mem;
  int cooperative, programmatic;
  int buffer_form;              // 1: parameters came as CU_LAUNCH_PARAM_BUFFER_POINTER
  int pointer_form;             // 1: parameters came as kernelParams (where padding was: the layout is unchanged)
  // The parameter space's size: the buffer's, or for kernelParams the end of the kernel's last parameter as its
  // cubin records it (0 when the image was no cubin: the fake then cannot know the sizes).
  std::size_t param_bytes;
  unsigned char params[4096];   // its first bytes (kernelParams: each parameter at its offset, the gaps 0)
};

// The copies so far (cuMemcpy*Async between allocated memory and the host) and stream syncs.
struct FakeCudaCopy {
  std::uint64_t count;          // copies so far
  int kind;                     // the last: 1 host to device, 2 device to host, 3 device to device
  std::size_t bytes;            // its size
  std::uintptr_t stream;        // its stream
  std::uint64_t syncs;          // cuStreamSynchronize calls so far
  std::uintptr_t synced_stream; // the last one's stream
};

extern "C" {
// Copies the last launch into `out` (count == 0: none yet). Exported by the fake libcuda.so.1.
void fake_cuda_last_launch(FakeCudaLaunch* out);
// Copies the copy record into `out`. Exported by the fake libcuda.so.1.
void fake_cuda_last_copy(FakeCudaCopy* out);
// The ordinal of the device whose context was current at the last launch (-1: none yet, or no context).
int fake_cuda_last_launch_device();
// Streams, as a framework's would be: cuStreamCreate / cuStreamDestroy (0: success). Handles are never reused;
// any driver call on a destroyed stream aborts with a message (FAKE_CUDA_STALE_STREAMS=count: counted, and the
// call fails with CUDA_ERROR_INVALID_HANDLE).
std::uintptr_t fake_cuda_stream_create();
int fake_cuda_stream_destroy(std::uintptr_t stream);
long fake_cuda_live_streams();        // created and not destroyed
long fake_cuda_stale_stream_uses();   // calls that named a destroyed stream (count mode)
long fake_cuda_live_allocations();    // cuMemAlloc(Async) addresses not freed yet; a bad free aborts
}
