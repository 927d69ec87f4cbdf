// jitbridge/streams.hpp — CUDA stream handles as the Python protocols write them, and ordering one
// stream after another with an event (never a host sync).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <utility>

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

// A stream handle that is stored beyond the call that received it, with what keeps the stream alive.
// `keepalive` is type-erased (the core never sees Python): the bindings put a reference to the
// framework's stream object there (python/src/interop/stream_owners.cpp), whose deleter may run on
// any thread. Immortal streams need none: the legacy and per-thread default streams, streams
// jitbridge owns, and torch's pooled streams (never destroyed). An empty keepalive on any other
// handle is an *unowned* stream (a raw int from the user): the user promises it outlives every
// object that stores it (docs/DESIGN.md, "Ownership and streams"). Copies share the keepalive.
// The rule for every stored stream in jitbridge: store a StreamRef, or use the handle only during
// the call that received it.
struct StreamRef {
  StreamRef() = default;
  explicit StreamRef(CUstream h, std::shared_ptr<const void> keep = {}) noexcept
      : handle(normalize_stream(h)), keepalive(std::move(keep)) {}

  CUstream handle = CU_STREAM_LEGACY;    // normalized
  std::shared_ptr<const void> keepalive;  // empty: immortal or unowned
};

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
