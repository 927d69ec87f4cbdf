// interop_objects.cpp — the registered ArrayView/Tensor types, InteropError translation and the dtype, shape and device parsers.
#include "interop/interop_objects.hpp"
#include "jitbridge/dlpack_export.hpp"

#include <fmt/format.h>

#include "interop/array_support.hpp"
#include "bindings.hpp"
#include "common/py_values.hpp"

namespace jitbridge::python {
namespace {

PyTypeObject* g_view_type = nullptr;
PyTypeObject* g_tensor_type = nullptr;

// Both classes are final, so the type test is one comparison; pybind11 keeps the C++ object in the
// instance's value holder.
template <class T>
T* core_of(PyObject* obj, PyTypeObject* type) noexcept {
  if (!type || Py_TYPE(obj) != type) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(obj);
  if (inst->simple_layout) return inst->simple_holder_constructed ? static_cast<T*>(inst->simple_value_holder[0]) : nullptr;
  py::detail::value_and_holder vh = inst->get_value_and_holder(nullptr, false);
  return vh && vh.holder_constructed() ? vh.template value_ptr<T>() : nullptr;
}

[[noreturn]] void type_error(const char* arg, const std::string& what) {
  throw py::type_error(fmt::format("{}: {}", arg, what));
}
[[noreturn]] void value_error(const char* arg, const std::string& what) {
  throw py::value_error(fmt::format("{}: {}", arg, what));
}

// An int or anything with __index__ (never a bool). The caller holds `item`.
std::int64_t index_value(PyObject* item, const char* arg, std::ptrdiff_t index = -1) {
  return int64_of(item, Subject(arg), index);
}

// Text is not a sequence of ints, whatever it iterates to.
void refuse_text(PyObject* o, const char* arg) {
  if (PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o))
    type_error(arg, fmt::format("expected ints (an int or a sequence of ints), got a {}", Py_TYPE(o)->tp_name));
}

// obj.<name>, owned. TypeError naming `subject` when reading it raises.
py::object attr_of(PyObject* obj, const char* name, const Subject& subject) {
  PyObject* v = PyObject_GetAttrString(obj, name);
  if (!v) raise_from_current(PyExc_TypeError, fmt::format("{}: reading its .{} failed", subject.text(), name));
  return py::reinterpret_steal<py::object>(v);
}

// obj.<name> as UTF-8 text. TypeError / ValueError naming `subject` when it cannot be read.
std::string text_attr(PyObject* obj, const char* name, const Subject& subject) {
  const py::object owned = attr_of(obj, name, subject);
  PyObject* v = owned.ptr();
  if (!PyUnicode_Check(v))
    type_error(subject.text().c_str(), fmt::format(".{} is a {}, not a str", name, Py_TYPE(v)->tp_name));
  return std::string(utf8_of(v, subject));
}

// Whether type(o).__module__ is `module` (no str() of anything is asked).
bool type_from_module(PyObject* o, const char* module, const char* arg) {
  PyObject* m = PyObject_GetAttr(reinterpret_cast<PyObject*>(Py_TYPE(o)), interned_names().module);
  if (!m) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
      raise_from_current(PyExc_TypeError, fmt::format("{}: reading type({}).__module__ failed", arg,
                                                      Py_TYPE(o)->tp_name));
    PyErr_Clear();
    return false;
  }
  const bool same = PyUnicode_Check(m) && PyUnicode_CompareWithASCIIString(m, module) == 0;
  Py_DECREF(m);
  return same;
}

std::optional<DLDataType> dtype_from_text(std::string_view s, const char* arg) {
  if (s.substr(0, 6) == "torch.") s.remove_prefix(6);  // str(torch.float32) == "torch.float32"
  if (std::optional<DLDataType> d = dtype_from_name(s)) return d;
  if (s.size() >= 2 && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) {
    try {
      return dtype_from_typestr(s, arg);
    } catch (const InteropError& e) {
      raise_interop(e);
    }
  }
  if (s.size() >= 2 && std::string_view("biufcV").find(s[0]) != std::string_view::npos &&
      s.find_first_not_of("0123456789", 1) == std::string_view::npos) {
    try {
      return dtype_from_typestr(fmt::format("<{}", s), arg);
    } catch (const InteropError&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

ArrayViewObject* array_view_object(PyObject* obj) noexcept { return core_of<ArrayViewObject>(obj, g_view_type); }
TensorObject* tensor_object(PyObject* obj) noexcept { return core_of<TensorObject>(obj, g_tensor_type); }
namespace {
// Instances come only from jitbridge's functions (py::cast allocates through tp_alloc): with
// tp_new gone, `ArrayView.__new__(ArrayView)` (or copy.copy, pickle) is a TypeError instead of an
// instance whose C++ object was never constructed, which every method would read as garbage.
PyTypeObject* without_python_new(PyTypeObject* type) noexcept {
  type->tp_new = nullptr;
  PyType_Modified(type);
  return type;
}
}  // namespace

void register_array_view_type(PyTypeObject* type) noexcept { g_view_type = without_python_new(type); }
void register_tensor_type(PyTypeObject* type) noexcept { g_tensor_type = without_python_new(type); }
bool is_jitbridge_type(PyTypeObject* type) noexcept {
  return type && (type == g_view_type || type == g_tensor_type);
}

PyObject* interop_exception_type(InteropError::Kind kind) noexcept {
  switch (kind) {
    case InteropError::Kind::type: return PyExc_TypeError;
    case InteropError::Kind::buffer: return PyExc_BufferError;
    case InteropError::Kind::value:
    case InteropError::Kind::overflow: break;
  }
  return PyExc_ValueError;
}

void raise_interop(const InteropError& e) {
  PyErr_SetString(interop_exception_type(e.kind()), e.what());
  throw py::error_already_set();
}

void raise_python_error(PyObject* fallback, const std::string& message) {
  if (!PyErr_Occurred()) PyErr_SetString(fallback, message.c_str());
  throw py::error_already_set();
}

DLDataType parse_dtype(py::handle dtype, const char* arg) {
  PyObject* o = dtype.ptr();
  if (PyUnicode_Check(o)) {
    if (std::optional<DLDataType> d = dtype_from_text(utf8_of(o, Subject(arg, ": the dtype name")), arg)) return *d;
  } else if (o == reinterpret_cast<PyObject*>(&PyBool_Type)) {
    return *dtype_from_name("bool");
  } else if (o == reinterpret_cast<PyObject*>(&PyLong_Type)) {
    return *dtype_from_name("int64");
  } else if (o == reinterpret_cast<PyObject*>(&PyFloat_Type)) {
    return *dtype_from_name("float64");
  } else if (o == reinterpret_cast<PyObject*>(&PyComplex_Type)) {
    return *dtype_from_name("complex128");
  } else if (o == Py_None) {
    type_error(arg, "a dtype is required");
  } else if (type_from_module(o, "torch", arg)) {
    const py::object s = str_of(o, Subject(arg, ": the torch dtype"));
    const std::string_view text = utf8_of(s.ptr(), Subject(arg, ": str() of the torch dtype"));
    if (std::optional<DLDataType> d = dtype_from_text(text, arg)) return *d;
    value_error(arg, fmt::format("torch dtype {} is not supported", text));
  }
  auto unknown = [&] {
    return fmt::format("{}: {} is not a dtype jitbridge knows (e.g. 'float32', 'bfloat16', torch.float16, "
                       "numpy.int8)",
                       arg, describe(o));
  };
  // Anything NumPy understands (np.float32, np.dtype("f4"), ml_dtypes.bfloat16, "d"), when NumPy is
  // already imported (jitbridge never imports a framework itself).
  if (py::object numpy = loaded_module("numpy")) {
    PyObject* d = PyObject_CallMethod(numpy.ptr(), "dtype", "O", o);
    if (!d) raise_from_current(PyExc_ValueError, unknown());
    const py::object nd = py::reinterpret_steal<py::object>(d);
    const Subject subject(arg, ": numpy.dtype() of it");
    if (text_attr(nd.ptr(), "byteorder", subject) == ">")
      value_error(arg, fmt::format("dtype {} is big-endian; only little-endian data is supported", describe(nd.ptr())));
    // A subarray dtype ('2i4', '(3,)f4') has items that are arrays themselves: NumPy moves those
    // dimensions into an array's shape, so taking it as opaque bytes would lose them silently.
    const py::object sub = attr_of(nd.ptr(), "shape", subject);
    if (!PyTuple_Check(sub.ptr()) || PyTuple_GET_SIZE(sub.ptr()) != 0)
      value_error(arg, fmt::format("dtype {} is a subarray dtype (its items are arrays); pass its base dtype "
                                   "and put the item dimensions in the shape",
                                   describe(nd.ptr())));
    const std::string name = text_attr(nd.ptr(), "name", subject);
    if (std::optional<DLDataType> r = dtype_from_name(name)) return *r;
    value_error(arg, fmt::format("dtype {} is not supported", name));
  }
  throw py::value_error(unknown());
}

Dims parse_ints(py::handle seq, const char* arg, bool allow_negative) {
  refuse_text(seq.ptr(), arg);
  // A snapshot (a list is copied): an item's __index__ may change the sequence while it is read.
  const py::tuple items = items_of(seq.ptr(), Subject(arg), true);
  const Py_ssize_t n = PyTuple_GET_SIZE(items.ptr());
  Dims out;
  out.resize(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const std::int64_t v = index_value(PyTuple_GET_ITEM(items.ptr(), i), arg, i);  // held by the snapshot
    if (v < 0 && !allow_negative) value_error(arg, fmt::format("entry {} is negative ({})", i, v));
    out[static_cast<std::size_t>(i)] = v;
  }
  return out;
}

Dims parse_shape(py::handle shape, const char* arg) {
  PyObject* o = shape.ptr();
  refuse_text(o, arg);
  if (!PyBool_Check(o) && PyIndex_Check(o) && !PySequence_Check(o)) {  // an int, a NumPy integer
    const std::int64_t v = index_value(shape.ptr(), arg);
    if (v < 0) value_error(arg, fmt::format("the size is negative ({})", v));
    return Dims(&v, 1);
  }
  return parse_ints(shape, arg, false);
}

std::optional<DLDevice> parse_device(py::handle device, const char* arg) {
  PyObject* o = device.ptr();
  if (o == Py_None) return std::nullopt;
  if (PyBool_Check(o)) type_error(arg, "expected a device, got a bool");
  if (PyLong_Check(o)) {
    const std::int64_t v = index_value(o, arg);
    if (v < 0 || v > INT32_MAX) value_error(arg, fmt::format("device ordinal {} is out of range", v));
    return DLDevice{kDLCUDA, static_cast<std::int32_t>(v)};
  }
  if (PyTuple_Check(o) && PyTuple_GET_SIZE(o) == 2) {  // a __dlpack_device__() tuple (it holds its items)
    const std::int64_t type = index_value(PyTuple_GET_ITEM(o, 0), arg, 0);
    const std::int64_t id = index_value(PyTuple_GET_ITEM(o, 1), arg, 1);
    if ((type != kDLCPU && type != kDLCUDA) || id < 0 || id > INT32_MAX)
      value_error(arg, fmt::format("device ({}, {}) is not a CPU or CUDA device", type, id));
    return DLDevice{static_cast<DLDeviceType>(type), static_cast<std::int32_t>(id)};
  }
  const py::object str = str_of(o, Subject(arg));  // "cuda:1", torch.device("cuda", 1)
  const std::string_view s = utf8_of(str.ptr(), Subject(arg, ": the device name"));
  if (s == "cpu") return DLDevice{kDLCPU, 0};
  if (s == "cuda") return DLDevice{kDLCUDA, current_device()};
  if (s.size() > 5 && s.compare(0, 5, "cuda:") == 0 && s.find_first_not_of("0123456789", 5) == std::string::npos &&
      s.size() < 15)
    return DLDevice{kDLCUDA, static_cast<std::int32_t>(std::stoll(std::string(s.substr(5))))};
  value_error(arg, fmt::format("'{}' is not a device (expected None, an ordinal, 'cuda', 'cuda:N' or 'cpu')", s));
}

py::tuple to_tuple(const Dims& dims) {
  py::tuple t(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) t[i] = py::int_(dims[i]);
  return t;
}

py::int_ stream_value(CUstream stream) { return py::int_(stream_to_int(stream)); }

std::string dims_text(const Dims& dims) {
  std::string out = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) out += fmt::format(i ? ", {}" : "{}", dims[i]);
  return out + (dims.size() == 1 ? ",)" : ")");
}

namespace {

// A capsule we made: its tensor is deleted here only if no consumer took it (renamed it used_…).
void capsule_destructor(PyObject* capsule) {
  ErrorStash stash;  // a capsule may die while an exception propagates: keep it intact
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
    if (m && m->deleter) m->deleter(m);
  } else if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  }
}

std::int64_t small_int(py::handle v, const char* arg, const char* what) {
  if (!PyLong_Check(v.ptr()) || PyBool_Check(v.ptr()))
    throw py::type_error(fmt::format("{}: {} must be an int, got a {}", arg, what, type_name(v)));
  return int64_of(v.ptr(), Subject(arg, ": ", what));  // an int: no Python code runs
}

}  // namespace

DlpackRequest parse_dlpack_request(py::handle stream, py::handle max_version, py::handle dl_device, py::handle copy,
                                   DLDevice device, const char* arg) {
  DlpackRequest r;
  if (!dl_device.is_none()) {
    if (!PyTuple_Check(dl_device.ptr()) || PyTuple_GET_SIZE(dl_device.ptr()) != 2)
      throw py::type_error(fmt::format("{}: dl_device must be a (device_type, device_id) tuple", arg));
    const std::int64_t type = small_int(PyTuple_GET_ITEM(dl_device.ptr(), 0), arg, "dl_device[0]");
    const std::int64_t id = small_int(PyTuple_GET_ITEM(dl_device.ptr(), 1), arg, "dl_device[1]");
    if (type != device.device_type || id != device.device_id)
      throw py::buffer_error(fmt::format("{}: dl_device=({}, {}) was asked for, but the array is on {} = ({}, {}); "
                                         "jitbridge does not copy across devices",
                                         arg, type, id, device_name(device), static_cast<int>(device.device_type),
                                         device.device_id));
  }
  if (!max_version.is_none()) {
    if (!PyTuple_Check(max_version.ptr()) || PyTuple_GET_SIZE(max_version.ptr()) != 2)
      throw py::type_error(fmt::format("{}: max_version must be a (major, minor) tuple", arg));
    r.versioned = small_int(PyTuple_GET_ITEM(max_version.ptr(), 0), arg, "max_version[0]") >= 1;
  }
  if (!copy.is_none()) {
    if (!PyBool_Check(copy.ptr())) throw py::type_error(fmt::format("{}: copy must be None, True or False", arg));
    r.copy = copy.ptr() == Py_True;
  }
  // The consumer's stream (array API): None is the legacy default stream, -1 asks for no sync.
  r.consumer = CU_STREAM_LEGACY;
  if (!stream.is_none()) {
    const std::int64_t s = small_int(stream, arg, "stream");
    if (s == -1) r.consumer.reset();
    else if (s < 0) throw py::value_error(fmt::format("{}: stream {} is not a stream (-1 means no sync)", arg, s));
    else r.consumer = stream_from_int(static_cast<std::uintptr_t>(s));
  }
  return r;
}

py::object dlpack_capsule(const ArrayView& view, bool versioned, std::uint64_t flags) {
  PyObject* capsule = nullptr;
  if (versioned) {
    DLManagedTensorVersioned* m = export_versioned(view, flags);
    capsule = PyCapsule_New(m, "dltensor_versioned", capsule_destructor);
    if (!capsule) m->deleter(m);
  } else {
    DLManagedTensor* m = export_legacy(view);
    capsule = PyCapsule_New(m, "dltensor", capsule_destructor);
    if (!capsule) m->deleter(m);
  }
  if (!capsule) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace jitbridge::python
