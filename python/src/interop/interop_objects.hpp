// interop_objects.hpp — what arrays.cpp, tensors.cpp and the test hooks (internals.cpp, jitbridge_testing) share:
// the C++ cores of jitbridge.ArrayView and jitbridge.Tensor, argument parsers (dtype, shape, device) and error
// translation.
#pragma once

#include <string>

#include "interop/arrays.hpp"
#include "jitbridge/streams.hpp"
#include "jitbridge/device_tensor.hpp"

namespace jitbridge::python {

// jitbridge.ArrayView: the view, the stream it was made for (with what keeps it alive: later
// launches and exports on other streams wait for it), and the Python object that keeps the
// producer alive (as_array's argument, or from_ptr's owner; None for none).
struct ArrayViewObject {
  ArrayView view;
  StreamRef stream;
  py::object keepalive;
};

// jitbridge.Tensor.
struct TensorObject {
  DeviceTensor tensor;
};

// The C++ core of a jitbridge.ArrayView / jitbridge.Tensor instance (both classes are final), else
// nullptr. No Python calls; valid while `obj` is alive. Usable once bind_arrays / bind_tensors ran.
ArrayViewObject* array_view_object(PyObject* obj) noexcept;
TensorObject* tensor_object(PyObject* obj) noexcept;
// Set by bind_arrays / bind_tensors: the registered Python types, which Python code cannot
// instantiate itself (their tp_new is removed: Cls.__new__(Cls) raises TypeError).
void register_array_view_type(PyTypeObject* type) noexcept;
void register_tensor_type(PyTypeObject* type) noexcept;
bool is_jitbridge_type(PyTypeObject* type) noexcept;

// The Python exception an InteropError becomes: type -> TypeError, value and overflow (a size,
// stride or offset that does not fit) -> ValueError, buffer -> BufferError. The one mapping, used
// by raise_interop and by the module's exception translator (errors.cpp).
PyObject* interop_exception_type(InteropError::Kind kind) noexcept;
// Sets that exception with e.what() (which names the argument) and throws py::error_already_set.
[[noreturn]] void raise_interop(const InteropError& e);
// Throws py::error_already_set for the Python error that is set; if none is (a producer that
// reported failure without setting one), sets `fallback` with `message` first.
[[noreturn]] void raise_python_error(PyObject* fallback, const std::string& message);

// A dtype: a jitbridge/NumPy name ("float32", "bfloat16", "float8_e4m3fn"), a torch dtype or its
// str ("torch.float32"), a typestr ("<f4", "f4"), a Python type (float, int, bool, complex), or
// anything numpy.dtype() accepts when NumPy is already imported. Throws TypeError / ValueError
// naming `arg`, also for a name that is not valid text and for a dtype object whose __str__ or
// attributes raise (the original becomes __cause__).
DLDataType parse_dtype(py::handle dtype, const char* arg);
// A shape: an int (or anything with __index__) or a sequence of at most kMaxNdim of them, each >= 0.
// The sequence is read from a snapshot, so an __index__ that changes it is harmless. Throws TypeError
// (not ints, an __index__ that raised, text), ValueError (negative, too many), OverflowError (an entry
// outside int64), each naming `arg`.
Dims parse_shape(py::handle shape, const char* arg);
// A sequence (any iterable but text) of at most kMaxNdim ints (anything with __index__), negative
// ones allowed when `allow_negative`. Throws as parse_shape.
Dims parse_ints(py::handle seq, const char* arg, bool allow_negative);
// A device: None (-> nullopt), an int ordinal, a (device_type, device_id) tuple, "cuda", "cuda:N",
// "cpu", or an object whose str() is one of those (torch.device). Returns the DLDevice. Throws
// TypeError / ValueError / OverflowError naming `arg`.
std::optional<DLDevice> parse_device(py::handle device, const char* arg);

// Python values of view fields.
py::tuple to_tuple(const Dims& dims);
py::int_ stream_value(CUstream stream);

// What a __dlpack__(stream, max_version, dl_device, copy) call asks of an array on `device`:
// `consumer` is the stream to order the data on (nullopt: -1, no sync), `versioned` a
// DLManagedTensorVersioned capsule, `copy` a copy. Throws TypeError/ValueError, and BufferError for
// a dl_device other than `device` (jitbridge does not copy across devices). `arg` names the method.
struct DlpackRequest {
  std::optional<CUstream> consumer;
  bool versioned = false;
  bool copy = false;
};
DlpackRequest parse_dlpack_request(py::handle stream, py::handle max_version, py::handle dl_device, py::handle copy,
                                   DLDevice device, const char* arg);
// A "dltensor_versioned" (or legacy "dltensor") capsule over `view`; its tensor holds a copy of
// view (and so view.owner) until the consumer deletes it, or the capsule does if never consumed.
py::object dlpack_capsule(const ArrayView& view, bool versioned, std::uint64_t flags);  // 1 for the legacy default stream, 2 per-thread, else the handle
std::string dims_text(const Dims& dims);  // "(2, 3)", "(4,)", "()"

}  // namespace jitbridge::python
