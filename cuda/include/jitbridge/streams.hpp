// jitbridge/streams.hpp — CUDA stream handles as the Python protocols write them, and ordering one
// stream after another with an event (never a host sync).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace jitbridge {

// The legacy default stream has three spellings (the NULL handle, CU_STREAM_LEGACY and the
// protocols' integer 1); jitbridge always writes it CU_STREAM_LEGACY so that handles compare equal.
inline CUstream normalize_stream(CUstream s) noexcept { return s ? s : CU_STREAM_LEGACY; }
inline bool same_stream(CUstream a, CUstream b) noexcept { return normalize_stream(a) == normalize_stream(b); }

// The stream an integer names, as the array API standard (__dlpack__(stream=)), __cuda_array_interface__
// v3 and raw handles (torch's .cuda_stream, CuPy's .ptr) write it: 0 (the driver's NULL stream) and 1
// are the legacy default stream, 2 the per-thread default stream, anything else the handle itself.
// Callers that must refuse 0 (CAI v3) check before calling.
inline CUstream stream_from_int(std::uintptr_t value) noexcept {
  return value <= 1 ? CU_STREAM_LEGACY : reinterpret_cast<CUstream>(value);
}

// The integer the protocols use for a stream: 1 for the legacy default stream, 2 for the per-thread
// default stream, otherwise the handle.
inline std::uintptr_t stream_to_int(CUstream s) noexcept {
  return reinterpret_cast<std::uintptr_t>(normalize_stream(s));
}

// Makes `consumer` wait for all work queued on `producer` so far: an event (CU_EVENT_DISABLE_TIMING)
// is recorded on `producer` and waited on by `consumer`, then destroyed (the driver keeps it until
// the wait is satisfied). Runs with `device`'s primary context current (the context the special
// handles refer to); a producer stream of another context is recorded in its own context. Does
// nothing when same_stream(consumer, producer). Never synchronizes the host.
// Throws NoDriverError, DriverError, std::out_of_range (no such device).
void stream_wait(int device, CUstream consumer, CUstream producer);

// The ordinal of the device whose context is current on this thread; 0 when none is (or there is
// no driver). Never throws.
int current_device() noexcept;

}  // namespace jitbridge
