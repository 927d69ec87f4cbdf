// stream_owners.hpp — what keeps a stream alive once the bindings store its handle (a Tensor's allocation or hand-off, a view's stream, a timer's stream), found only when a handle is about to be stored.
#pragma once

#include <optional>

#include "interop/arrays.hpp"
#include "jitbridge/streams.hpp"

namespace jitbridge::python {

// The rules (docs/DESIGN.md, "Ownership and streams"), in order:
//   - the legacy and per-thread default streams are immortal: no keepalive;
//   - an explicit stream object (a CuPy or torch Stream, any __cuda_stream__ provider): that object;
//   - a jitbridge.Tensor's or ArrayView's stream: what that object already keeps;
//   - an int (explicit, or from a DLPack consumer's __dlpack__(stream=)): CuPy's current stream
//     object on `device` when its .ptr is the handle (cupy already imported), else nothing when it
//     is torch's current stream (torch's streams come from its pool and are never destroyed), else
//     nothing: an unowned handle, which the user must keep alive (as torch's record_stream asks).
// Everything here needs the GIL. A framework whose lookup raises counts as not matching.

// An explicit stream= argument with its owner (parse_stream's rules for the handle); nullopt for
// None. `device` is where an int handle is looked up. Throws what parse_stream throws.
std::optional<StreamRef> parse_stream_ref(py::handle stream, int device, const char* arg);

// `handle` with what keeps it alive, by lookup (the int rules above). Throws std::bad_alloc only.
StreamRef owned_stream(CUstream handle, int device);

// Called by consumer_stream(): where this call's consumer stream came from (borrowed, alive for the
// call: the caller's argument or one of its arrays; null: not from an object).
void note_consumer_source(CUstream handle, PyObject* explicit_obj, PyObject* array) noexcept;

// The note of this thread's last consumer_stream() call, to be put back (renote) after Python code
// that may have made a nested jitbridge call (a producer's __dlpack__, __index__, a finalizer): the
// nested call's consumer_stream() replaced it. Only the call that took the note may renote it (its
// pointers are borrowed from that call's arguments).
struct ConsumerSource {
  std::uint64_t generation = 0;
  CUstream handle = nullptr;
  PyObject* explicit_obj = nullptr;
  PyObject* array = nullptr;
};
ConsumerSource consumer_source() noexcept;
void renote_consumer_source(const ConsumerSource& source) noexcept;

// The consumer stream `handle` of the current consumer_stream() call, with its owner: the source
// consumer_stream() noted when it is still this call's (same call generation and handle), else
// owned_stream(handle, device). Used only when a handle will be stored (a hand-off), never on the
// same-stream path.
StreamRef consumer_stream_ref(CUstream handle, int device);

}  // namespace jitbridge::python
