// cai_fields.cpp — __cuda_array_interface__ dicts and their fields (ints, int tuples, addresses) into ArrayViews, reading every field through a strong reference.
#include <fmt/format.h>

#include "interop/array_support.hpp"
#include "jitbridge/device.hpp"
#include "jitbridge/streams.hpp"
#include "common/py_values.hpp"

namespace jitbridge::python {

std::int64_t int_item(PyObject* v, const char* arg, const char* what, std::ptrdiff_t index) {
  std::int64_t out = 0;
  const IntRead status = read_int64(v, out);
  if (status != IntRead::ok) raise_int_error(status, v, Subject(arg, ": ", what), index);
  return out;
}

void int_sequence(PyObject* seq, Dims& out, const char* arg, const char* what) {
  // A snapshot: a list given as shape may be changed by an item's __index__ while it is read.
  const py::tuple items = items_of(seq, Subject(arg, ": __cuda_array_interface__ '", what, "'"), false);
  const Py_ssize_t n = PyTuple_GET_SIZE(items.ptr());
  out.resize(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    std::int64_t x = 0;
    PyObject* item = PyTuple_GET_ITEM(items.ptr(), i);  // the snapshot holds it (a tuple never changes)
    const IntRead status = read_int64(item, x);
    if (status != IntRead::ok) raise_int_error(status, item, Subject(arg, ": __cuda_array_interface__ ", what), i);
    out[static_cast<std::size_t>(i)] = x;
  }
}

std::uintptr_t address_item(PyObject* v, const char* arg, const char* what) {
  static_assert(sizeof(std::uintptr_t) == sizeof(std::uint64_t), "64-bit addresses");
  return static_cast<std::uintptr_t>(uint64_of(v, Subject(arg, ": ", what)));
}

int cai_device(std::uintptr_t ptr, const char* arg) {
  static const int count = Device::count();
  if (count <= 1) return 0;
  if (ptr == 0) return current_device();
  int ordinal = 0;
  CUresult rc = driver().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
  if (rc != CUDA_SUCCESS)
    fail(PyExc_ValueError, fmt::format("{}: the driver does not know the data pointer {:#x} ({})", arg, ptr,
                                       DriverError("cuPointerGetAttribute", rc).what()));
  return ordinal;
}

void fill_cai_view(std::uintptr_t ptr, bool readonly, const std::int64_t* shape, std::size_t ndim,
                   const std::int64_t* strides_bytes, DLDataType dtype, CUstream producer, CUstream consumer,
                   ArrayView& view, const char* arg) {
  fill_from_cai(ptr, readonly, shape, ndim, strides_bytes, dtype, {kDLCUDA, 0}, view, arg);
  view.device.device_id = cai_device(ptr, arg);
  if (view.size() != 0 && producer != consumer) stream_wait(view.device.device_id, consumer, producer);
}

std::optional<DLDataType> fp8_of_descr(PyObject* descr) {
  if (!descr || !PyList_CheckExact(descr) || PyList_GET_SIZE(descr) != 1) return std::nullopt;
  PyObject* field = PyList_GET_ITEM(descr, 0);
  if (!PyTuple_CheckExact(field) || PyTuple_GET_SIZE(field) != 2) return std::nullopt;
  PyObject* name = PyTuple_GET_ITEM(field, 0);
  PyObject* type = PyTuple_GET_ITEM(field, 1);
  if (!PyUnicode_CheckExact(name) || !PyUnicode_CheckExact(type) || PyUnicode_CompareWithASCIIString(type, "|V1") != 0)
    return std::nullopt;
  Py_ssize_t n = 0;
  const char* text = PyUnicode_AsUTF8AndSize(name, &n);
  if (!text) {
    PyErr_Clear();  // a name that is not valid text names no dtype
    return std::nullopt;
  }
  return fp8_from_descr_name(std::string_view(text, static_cast<std::size_t>(n)));
}

void view_cai_dict(PyObject* iface, CUstream consumer, ArrayView& view, const char* arg) {
  const InternedNames& k = interned_names();
  if (!PyDict_Check(iface))
    fail(PyExc_TypeError,
         fmt::format("{}: __cuda_array_interface__ is a {}, not a dict", arg, Py_TYPE(iface)->tp_name));
  // Every field as a strong reference before any is converted: converting runs Python code
  // (__index__, __bool__) that may change or empty the dict.
  auto required = [&](PyObject* key, const char* name) {
    py::object v = dict_item(iface, key);
    if (!v) fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ has no '{}' key", arg, name));
    return v;
  };
  const py::object version_obj = required(k.version, "version");
  const py::object shape_obj = required(k.shape, "shape");
  const py::object typestr_obj = required(k.typestr, "typestr");
  const py::object data_obj = required(k.data, "data");
  const py::object strides_obj = dict_item(iface, k.strides);
  const py::object mask_obj = dict_item(iface, k.mask);
  const py::object stream_obj = dict_item(iface, k.stream);

  const std::int64_t version = int_item(version_obj.ptr(), arg, "__cuda_array_interface__ 'version'");
  if (version > 3 || version < 0)
    fail(PyExc_ValueError,
         fmt::format("{}: __cuda_array_interface__ version {} is not supported (versions 0 to 3 are)", arg, version));
  if (mask_obj && !mask_obj.is_none())
    fail(PyExc_BufferError, fmt::format("{}: __cuda_array_interface__ has a mask; masked arrays are not supported", arg));
  if (!PyUnicode_Check(typestr_obj.ptr()))
    fail(PyExc_TypeError, fmt::format("{}: __cuda_array_interface__ 'typestr' is a {}, not a str", arg,
                                      Py_TYPE(typestr_obj.ptr())->tp_name));
  // Valid while typestr_obj lives (a str never changes).
  const std::string_view typestr = utf8_of(typestr_obj.ptr(), Subject(arg, ": __cuda_array_interface__ 'typestr'"));

  std::uintptr_t ptr = 0;
  bool readonly = false;
  if (!data_obj.is_none()) {
    PyObject* data = data_obj.ptr();
    if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2)
      fail(PyExc_TypeError, fmt::format("{}: __cuda_array_interface__ 'data' must be a (pointer, read_only) tuple, "
                                        "got a {}{}",
                                        arg, Py_TYPE(data)->tp_name,
                                        PyTuple_Check(data) ? fmt::format(" of {}", PyTuple_GET_SIZE(data)) : ""));
    const py::object pointer = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(data, 0));
    const py::object flag = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(data, 1));
    ptr = address_item(pointer.ptr(), arg, "__cuda_array_interface__ data pointer");
    const int ro = PyObject_IsTrue(flag.ptr());  // may run __bool__
    if (ro < 0)
      raise_from_current(PyExc_TypeError, fmt::format("{}: __cuda_array_interface__ 'data' read-only flag (a {}) "
                                                      "cannot be read as a bool",
                                                      arg, Py_TYPE(flag.ptr())->tp_name));
    readonly = ro != 0;
  }
  Dims shape, strides;
  int_sequence(shape_obj.ptr(), shape, arg, "shape");
  const bool has_strides = strides_obj && !strides_obj.is_none();
  if (has_strides) {
    int_sequence(strides_obj.ptr(), strides, arg, "strides");
    if (strides.size() != shape.size())
      fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ strides has {} entries for {} dimensions", arg,
                                         strides.size(), shape.size()));
  }
  CUstream producer = consumer;
  if (stream_obj && !stream_obj.is_none()) {
    const std::int64_t s = int_item(stream_obj.ptr(), arg, "__cuda_array_interface__ 'stream'");
    if (s == 0)
      fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ stream 0 is not allowed (1 is the legacy "
                                         "default stream, 2 the per-thread one)", arg));
    if (s < 0) fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ stream {} is negative", arg, s));
    producer = stream_from_int(static_cast<std::uintptr_t>(s));
  }
  // Validate fully before asking the driver anything.
  DLDataType dtype = dtype_from_typestr(typestr, arg);
  if (dtype == opaque_bytes(1)) {
    // "|V1" with a descr naming an fp8 dtype, as jitbridge exports fp8 (only exact lists, tuples
    // and strs are read: no Python code runs; anything else leaves the raw byte).
    const py::object descr = dict_item(iface, k.descr);
    if (std::optional<DLDataType> named = fp8_of_descr(descr.ptr())) dtype = *named;
  }
  fill_cai_view(ptr, readonly, shape.data(), shape.size(), has_strides ? strides.data() : nullptr, dtype, producer,
                consumer, view, arg);
}

}  // namespace jitbridge::python
