// arrays.hpp — Python objects to ArrayViews (the adapter per type: DLPack exchange API, __dlpack__,
// __cuda_array_interface__, jitbridge's own types), the consumer-stream rule, and the output tensors.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>

#include "jitbridge/array.hpp"
#include "jitbridge/driver.hpp"

namespace jitbridge::python {

namespace py = pybind11;

// How arrays of one Python type are read; chosen at the first object of that type and remembered.
// cupy_fields / numba_fields: exactly cupy.ndarray / numba's DeviceNDArray, whose
// __cuda_array_interface__ fields are read from their attributes (framework_arrays.cpp); the first
// array of the type is also read through its CAI, and any difference demotes the type to
// cuda_array_interface for good.
enum class Protocol { jitbridge, exchange_api, dlpack, cuda_array_interface, cupy_fields, numba_fields, none };

struct TypeAdapter {
  mutable Protocol protocol = Protocol::none;  // mutable: cupy_fields/numba_fields may be demoted
  mutable bool verified = false;               // cupy_fields/numba_fields: checked against the CAI
  const DLPackExchangeAPI* api = nullptr;  // exchange_api: the type's table (major version 1)
  bool cupy = false;            // a CuPy type: its framework stream is cupy.cuda.get_current_stream()
  // A producer whose arrays are immutable although it exports them writable (JAX: a type from the
  // jax or jaxlib modules): its name, set in the views of its arrays (ArrayView::immutable_producer),
  // which packing treats as read-only. nullptr otherwise.
  const char* immutable_producer = nullptr;
  bool instance_probe = false;  // Protocol::none, but instances have a __dict__ that may hold
                                // __cuda_array_interface__ or __dlpack__ (looked up per object)
};

// The adapter for `type`, cached per type (the cache holds a reference to the type, so a freed
// type's address is never mistaken for another). Call with the GIL held. Never throws.
const TypeAdapter& adapter_for(PyTypeObject* type);

// Fills `view` from `obj` for work queued on `consumer_stream`, which must be the stream the
// caller then uses (resolve it first with consumer_stream(); a placeholder is wrong: the stream
// handshake below happens here). Handshake per protocol, never a host sync:
//  - exchange API: none when the framework's current stream (current_work_stream) is the consumer
//    stream; else the consumer stream waits for it (an event).
//  - __dlpack__: the producer is called with stream=<consumer stream> and orders itself.
//  - CAI v3 "stream" other than the consumer stream: the consumer waits for it (an event).
//  - jitbridge.Tensor: the tensor's buffer is handed to the consumer stream (DeviceBuffer::hand_to:
//    the consumer waits for the tensor's stream, which then becomes the consumer stream, and the
//    tensor's free waits for the consumer's work). The tensor stores the consumer stream with its
//    owner (consumer_stream_ref, stream_owners.hpp): callers call consumer_stream() first in the
//    same call, so the owner it noted (the stream= object, the array it came from) is found.
//    jitbridge.ArrayView: the consumer waits for the stream the view was made for, if different.
// The view borrows: it is valid while `obj` is alive. view.owner is set where the protocol handed
// out something to release (a DLPack capsule's tensor, deleted exactly once when the last copy of
// the view goes) and, for jitbridge's own types, shares their owner.
// Returns false, touching nothing, when `obj` speaks no array protocol (the caller may then try
// it as a scalar). Throws py::type_error / py::value_error / py::buffer_error naming `arg`
// (py::error_already_set for errors the producer raised, prefixed with `arg` where it can be),
// NoDriverError / DriverError when a stream handshake needs the driver and it fails.
bool view_array(PyObject* obj, CUstream consumer_stream, ArrayView& view, const char* arg);
// The same with the adapter of Py_TYPE(obj) already in hand (the launch path looks it up once).
bool view_array(PyObject* obj, const TypeAdapter& adapter, CUstream consumer_stream, ArrayView& view, const char* arg);

// An explicit stream= argument: None -> nullopt; an int (0 and 1: the legacy default stream, 2: the
// per-thread default stream, else the handle); an object with __cuda_stream__() returning
// (version, handle); torch.cuda.Stream (.cuda_stream); CuPy's Stream (.ptr). The result is
// normalized (the legacy default stream is CU_STREAM_LEGACY).
// Throws py::type_error naming `arg` for anything else, py::value_error for a negative int.
std::optional<CUstream> parse_stream(py::handle stream, const char* arg);

// The current stream of the framework `array` came from, normalized: PyTorch's (any type with the
// DLPack exchange API) through current_work_stream(kDLCUDA, device_id); CuPy's current stream on
// the array's device (only when cupy is already in sys.modules); a jitbridge.Tensor's
// own stream; a jitbridge.ArrayView's stream. nullopt for other producers and for arrays in host
// memory. device_id < 0: the array's own device (an exchange-API array is viewed once to find
// it). Throws what the framework raised (py::error_already_set).
std::optional<CUstream> framework_stream(PyObject* array, int device_id);

// The consumer-stream rule (docs/DESIGN.md, "Ownership and streams"): `explicit_stream` when it is
// not None (parse_stream); else the framework stream of the first of `objs` that has one (objects
// that are not arrays are skipped); else CU_STREAM_LEGACY. Throws what parse_stream and
// framework_stream throw.
CUstream consumer_stream(py::handle explicit_stream, PyObject* const* objs, std::size_t n, const char* arg);

// jitbridge.ArrayView, jitbridge.as_array, jitbridge.from_ptr (array_objects.cpp).
void bind_arrays(py::module_& m);
// jitbridge.Tensor, jitbridge.empty / zeros / empty_like (tensors.cpp).
void bind_tensors(py::module_& m);

}  // namespace jitbridge::python
