// arrays.hpp — Python objects to ArrayViews (the adapter per type: DLPack exchange API, __dlpack__,
// __cuda_array_interface__, jitbridge's own types), the consumer-stream rule, and the output tensors.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

#include "jitbridge/array.hpp"
#include "jitbridge/driver.hpp"

namespace jitbridge::python {

namespace py = pybind11;

// How arrays of one Python type are read; chosen at the first object of that type and remembered.
enum class Protocol { jitbridge, exchange_api, dlpack, cuda_array_interface, none };

struct TypeAdapter {
  Protocol protocol = Protocol::none;
  const DLPackExchangeAPI* api = nullptr;  // exchange_api: the type's table (major version 1)
};

// The adapter for `type`, cached per type (the cache holds a reference to the type, so a freed
// type's address is never mistaken for another). Call with the GIL held.
const TypeAdapter& adapter_for(PyTypeObject* type);

// Fills `view` from `obj` for a launch on `consumer_stream`. The view borrows: it is valid while
// `obj` is alive; view.owner is set only where the protocol handed out something that must be
// released (a DLPack capsule's tensor, which it then deletes exactly once). A CAI v3 producer
// stream other than `consumer_stream` is made to precede it with an event (no host sync).
// Returns false, touching nothing, when `obj` speaks no array protocol (the caller may then try
// it as a scalar). Throws py::type_error / py::value_error / py::buffer_error naming `arg`.
bool view_array(PyObject* obj, CUstream consumer_stream, ArrayView& view, const char* arg);

// An explicit stream= argument: None -> nullopt; an int handle; an object with __cuda_stream__
// (returning (version, handle)); torch.cuda.Stream (.cuda_stream); CuPy's Stream (.ptr).
// Throws py::type_error naming `arg` for anything else.
std::optional<CUstream> parse_stream(py::handle stream, const char* arg);

// The current stream of the framework `array` came from: PyTorch's through the exchange API's
// current_work_stream, CuPy's current stream; nullopt for other producers.
std::optional<CUstream> framework_stream(PyObject* array, int device_id);

// jitbridge.ArrayView, jitbridge.as_array, jitbridge.from_ptr (arrays.cpp).
void bind_arrays(py::module_& m);
// jitbridge.Tensor, jitbridge.empty / zeros / empty_like (tensors.cpp).
void bind_tensors(py::module_& m);

}  // namespace jitbridge::python
