// checked_args.hpp — the launch and compile bindings' argument readers on top of py_values.hpp: ints within a range, flags, text; errors naming the argument.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "common/py_values.hpp"

// Parameter types that accept any object (the function checks it itself, for messages that name the
// argument) but show a precise annotation in the signature help() prints.
namespace jitbridge::python {
inline int any_object(PyObject*) { return 1; }
}  // namespace jitbridge::python

#define JITBRIDGE_ANNOTATED_OBJECT(Cls, annotation)                                   \
  namespace jitbridge::python {                                                       \
  class Cls : public py::object {                                                     \
   public:                                                                            \
    PYBIND11_OBJECT_DEFAULT(Cls, py::object, any_object)                              \
  };                                                                                  \
  }                                                                                   \
  template <>                                                                         \
  struct pybind11::detail::handle_type_name<jitbridge::python::Cls> {                 \
    static constexpr auto name = const_name(annotation);                              \
  };

JITBRIDGE_ANNOTATED_OBJECT(StrArg, "str")
JITBRIDGE_ANNOTATED_OBJECT(IndexArg, "typing.SupportsIndex")

namespace jitbridge::python {

// `value` as an integer in [lo, hi]: an int (never a bool) or any object with __index__, which is
// run once (hold a strong reference to `value`). Throws TypeError "<name>: expected an int, got
// <type>"; TypeError naming the argument when __index__ raised an ordinary exception (the original
// as __cause__; KeyboardInterrupt and the like propagate unchanged); ValueError with the message
// out_of_range(<the value as text: its digits, or repr() beyond int64>) outside [lo, hi].
template <class Message>
std::int64_t int_arg(PyObject* value, const Subject& name, std::int64_t lo, std::int64_t hi, Message&& out_of_range) {
  std::int64_t v = 0;
  switch (read_int64(value, v)) {
    case IntRead::ok:
      if (v >= lo && v <= hi) return v;
      throw py::value_error(out_of_range(std::to_string(v)));
    case IntRead::overflow:
      throw py::value_error(out_of_range(describe(value)));  // repr(): __index__ is not run twice
    case IntRead::index_failed:
      raise_from_current(PyExc_TypeError,
                         fmt::format("{}: expected an int, got {} whose __index__() failed", name.text(),
                                     type_name(value)));
    case IntRead::not_int:
    case IntRead::negative:
      break;
  }
  throw py::type_error(fmt::format("{}: expected an int, got {}", name.text(), type_name(value)));
}

// The truth of a flag argument (cooperative=...): True, False and None directly, anything else
// through bool(). An ordinary exception from __bool__/__len__ becomes a TypeError naming the
// argument (the original as __cause__), raised at once; KeyboardInterrupt and the like propagate.
inline bool flag_arg(PyObject* value, const Subject& name) {
  if (value == Py_True) return true;
  if (value == Py_False || value == Py_None) return false;
  const int truth = PyObject_IsTrue(value);
  if (truth < 0)
    raise_from_current(PyExc_TypeError,
                       fmt::format("{}: bool() of the {} failed", name.text(), type_name(value)));
  return truth == 1;
}

// A str argument as its UTF-8 bytes (with `bytes_too`, a bytes object's bytes as they are). Another
// type is a TypeError "<name>: expected str, got <type>"; a str with no UTF-8 form (a lone
// surrogate, "\ud800") a ValueError "<name> is not valid text (UnicodeEncodeError: ...)".
inline std::string text_arg(py::handle value, const Subject& name, bool bytes_too = false) {
  PyObject* o = value.ptr();
  if (bytes_too && PyBytes_Check(o))
    return std::string(PyBytes_AS_STRING(o), static_cast<std::size_t>(PyBytes_GET_SIZE(o)));
  if (!PyUnicode_Check(o))
    throw py::type_error(fmt::format("{}: expected {}, got {}", name.text(), bytes_too ? "str or bytes" : "str",
                                     type_name(value)));
  return std::string(utf8_of(o, name));
}

}  // namespace jitbridge::python
