// py_values.cpp — checked readers of untrusted Python values (see py_values.hpp).
#include "common/py_values.hpp"

#include <fmt/format.h>

#include "jitbridge/array.hpp"

namespace jitbridge::python {
namespace {

// str() or repr() of `obj` as UTF-8 (what has no UTF-8 form, lone surrogates, backslash-escaped), at
// most `limit` bytes (then "..."); `ok` false and "" when that fails. Leaves no error set.
std::string text_of(PyObject* obj, bool repr, std::size_t limit, bool& ok) noexcept {
  ok = false;
  PyObject* s = repr ? PyObject_Repr(obj) : PyObject_Str(obj);
  PyObject* bytes = s ? PyUnicode_AsEncodedString(s, "utf-8", "backslashreplace") : nullptr;
  Py_XDECREF(s);
  if (!bytes) {
    PyErr_Clear();
    return {};
  }
  const std::size_t n = static_cast<std::size_t>(PyBytes_GET_SIZE(bytes));
  std::string out;
  try {
    out.assign(PyBytes_AS_STRING(bytes), n > limit ? limit : n);
    if (n > limit) out += "...";
    ok = true;
  } catch (...) {
    out.clear();
  }
  Py_DECREF(bytes);
  return out;
}

[[noreturn]] void set_and_throw(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

}  // namespace

std::string Subject::text() const {
  std::string out;
  for (std::string_view p : parts) out.append(p.data(), p.size());
  return out;
}

void raise_from_current(PyObject* type, const std::string& message) {
  if (!PyErr_Occurred()) set_and_throw(type, message);
  py::error_already_set original;
  if (!original.matches(PyExc_Exception) || original.matches(PyExc_MemoryError)) throw original;
  PyObject* value = original.value().ptr();
  const std::string text = exception_text(value);
  const std::string full = text.empty() ? fmt::format("{} ({})", message, Py_TYPE(value)->tp_name)
                                        : fmt::format("{} ({}: {})", message, Py_TYPE(value)->tp_name, text);
  py::raise_from(original, type, full.c_str());
  throw py::error_already_set();
}

std::string describe(PyObject* obj) noexcept {
  ErrorStash stash;
  bool ok = false;
  std::string s = text_of(obj, true, 80, ok);
  if (ok) return s;
  try {
    return fmt::format("<a {}>", Py_TYPE(obj)->tp_name);
  } catch (...) {
    return {};
  }
}

std::string exception_text(PyObject* exc) noexcept {
  ErrorStash stash;
  bool ok = false;
  return text_of(exc, false, 2000, ok);
}

py::object dict_item(PyObject* dict, PyObject* key) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* v = nullptr;
  if (PyDict_GetItemRef(dict, key, &v) < 0) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(v);
#else
  PyObject* v = PyDict_GetItemWithError(dict, key);  // borrowed: made strong before anything else runs
  if (!v && PyErr_Occurred()) throw py::error_already_set();
  return py::reinterpret_borrow<py::object>(v);
#endif
}

py::object loaded_module(const char* name) {
  py::object key = py::reinterpret_steal<py::object>(PyUnicode_FromString(name));
  if (!key) throw py::error_already_set();
  PyObject* m = PyImport_GetModule(key.ptr());  // new reference; NULL without an error: not imported
  if (!m && PyErr_Occurred()) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(m);
}

// ---- ints ---------------------------------------------------------------------------------------

namespace {

// `v` as an exact-or-subclass int, a new reference; nullptr with `status` set otherwise.
PyObject* as_int(PyObject* v, IntRead& status) noexcept {
  if (PyBool_Check(v)) {
    status = IntRead::not_int;
    return nullptr;
  }
  if (PyLong_Check(v)) {
    Py_INCREF(v);
    return v;
  }
  if (!PyIndex_Check(v)) {
    status = IntRead::not_int;
    return nullptr;
  }
  PyObject* n = PyNumber_Index(v);  // runs __index__: the caller holds `v`
  if (!n) status = IntRead::index_failed;
  return n;
}

}  // namespace

IntRead read_int64(PyObject* v, std::int64_t& out) noexcept {
  IntRead status = IntRead::ok;
  PyObject* n = as_int(v, status);
  if (!n) return status;
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(n, &overflow);
  Py_DECREF(n);
  if (overflow) return IntRead::overflow;
  if (x == -1 && PyErr_Occurred()) return IntRead::index_failed;  // not for an int; kept for safety
  out = x;
  return IntRead::ok;
}

IntRead read_uint64(PyObject* v, std::uint64_t& out) noexcept {
  IntRead status = IntRead::ok;
  PyObject* n = as_int(v, status);
  if (!n) return status;
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(n, &overflow);
  if (x == -1 && !overflow && PyErr_Occurred()) {
    Py_DECREF(n);
    return IntRead::index_failed;
  }
  if (overflow < 0 || (!overflow && x < 0)) {
    Py_DECREF(n);
    return IntRead::negative;
  }
  if (!overflow) {
    Py_DECREF(n);
    out = static_cast<std::uint64_t>(x);
    return IntRead::ok;
  }
  const unsigned long long u = PyLong_AsUnsignedLongLong(n);  // above INT64_MAX
  Py_DECREF(n);
  if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();  // the OverflowError this read itself raised
    return IntRead::overflow;
  }
  out = static_cast<std::uint64_t>(u);
  return IntRead::ok;
}

void raise_int_error(IntRead status, PyObject* v, const Subject& subject, std::ptrdiff_t index) {
  const std::string where = index >= 0 ? fmt::format(" (entry {})", index) : std::string();
  switch (status) {
    case IntRead::not_int:
      set_and_throw(PyExc_TypeError, fmt::format("{} holds a {}, not an int{}", subject.text(), Py_TYPE(v)->tp_name, where));
    case IntRead::index_failed:
      raise_from_current(PyExc_TypeError, fmt::format("{} holds a {} whose __index__() failed{}", subject.text(),
                                                      Py_TYPE(v)->tp_name, where));
    case IntRead::overflow:
      set_and_throw(PyExc_OverflowError,
                    fmt::format("{} holds {}, which is out of the 64-bit range{}", subject.text(), describe(v), where));
    case IntRead::negative:
      set_and_throw(PyExc_ValueError, fmt::format("{} is negative ({}){}", subject.text(), describe(v), where));
    case IntRead::ok:
      break;
  }
  set_and_throw(PyExc_SystemError, fmt::format("{}: raise_int_error without an error", subject.text()));
}

std::int64_t int64_of(PyObject* v, const Subject& subject, std::ptrdiff_t index) {
  std::int64_t out = 0;
  const IntRead status = read_int64(v, out);
  if (status != IntRead::ok) raise_int_error(status, v, subject, index);
  return out;
}

std::uint64_t uint64_of(PyObject* v, const Subject& subject) {
  std::uint64_t out = 0;
  const IntRead status = read_uint64(v, out);
  if (status != IntRead::ok) raise_int_error(status, v, subject);
  return out;
}

// ---- text and sequences -----------------------------------------------------------------------------

std::string_view utf8_of(PyObject* s, const Subject& subject) {
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s, &n);
  if (!p) raise_from_current(PyExc_ValueError, fmt::format("{} is not valid text", subject.text()));
  return {p, static_cast<std::size_t>(n)};
}

py::object str_of(PyObject* obj, const Subject& subject) {
  PyObject* s = PyObject_Str(obj);
  if (!s) raise_from_current(PyExc_TypeError, fmt::format("{}: str() of the {} failed", subject.text(), Py_TYPE(obj)->tp_name));
  return py::reinterpret_steal<py::object>(s);
}

py::tuple items_of(PyObject* seq, const Subject& subject, bool any_iterable) {
  py::tuple out;
  if (PyTuple_Check(seq)) {
    out = py::reinterpret_borrow<py::tuple>(seq);  // immutable: its items live as long as it does
  } else if (PyList_Check(seq)) {
    PyObject* t = PyList_AsTuple(seq);  // a copy: __index__ may change the list while items are read
    if (!t) throw py::error_already_set();
    out = py::reinterpret_steal<py::tuple>(t);
  } else if (!any_iterable) {
    set_and_throw(PyExc_TypeError, fmt::format("{} is a {}, not a tuple", subject.text(), Py_TYPE(seq)->tp_name));
  } else {
    PyObject* it = PyObject_GetIter(seq);
    if (!it)
      raise_from_current(PyExc_TypeError,
                         fmt::format("{}: expected a sequence of ints, got a {}", subject.text(), Py_TYPE(seq)->tp_name));
    py::object iter = py::reinterpret_steal<py::object>(it);
    py::list items;
    while (PyObject* item = PyIter_Next(it)) {  // at most kMaxNdim + 1: an endless iterator ends here
      const int rc = PyList_Append(items.ptr(), item);
      Py_DECREF(item);
      if (rc != 0) throw py::error_already_set();
      if (static_cast<std::size_t>(PyList_GET_SIZE(items.ptr())) > kMaxNdim) break;
    }
    if (PyErr_Occurred()) raise_from_current(PyExc_TypeError, fmt::format("{}: iterating it failed", subject.text()));
    PyObject* t = PyList_AsTuple(items.ptr());
    if (!t) throw py::error_already_set();
    out = py::reinterpret_steal<py::tuple>(t);
  }
  if (static_cast<std::size_t>(PyTuple_GET_SIZE(out.ptr())) > kMaxNdim)
    set_and_throw(PyExc_ValueError,
                  fmt::format("{} has more than {} entries (at most {} dimensions are supported)", subject.text(), kMaxNdim,
                              kMaxNdim));
  return out;
}

}  // namespace jitbridge::python
