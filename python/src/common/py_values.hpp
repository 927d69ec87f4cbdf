// py_values.hpp — reading untrusted Python values in the bindings: strong references held across Python code, checked int conversions, and errors that name the argument.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace jitbridge::python {

namespace py = pybind11;

// Every function here needs the GIL.

// The start of an error message, naming the argument and the field ("as_array(obj)",
// ": __cuda_array_interface__ ", "shape"): its parts are joined only when an error is raised, so
// the readers cost no formatting when the value is good. The parts must outlive the call.
struct Subject {
  std::string_view parts[5];
  Subject(std::string_view a, std::string_view b = {}, std::string_view c = {}, std::string_view d = {},
          std::string_view e = {})
      : parts{a, b, c, d, e} {}
  Subject(const char* a) : Subject(std::string_view(a)) {}
  Subject(const std::string& a) : Subject(std::string_view(a)) {}
  std::string text() const;
};

// Keeps the pending Python error (if any) aside for its lifetime and puts it back at the end: for
// code that may run while an exception is propagating (capsule destructors, message building) and
// must neither see nor clear it. Errors raised meanwhile are dropped when it restores.
struct ErrorStash {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  ErrorStash() noexcept { PyErr_Fetch(&type, &value, &traceback); }
  ~ErrorStash() { PyErr_Restore(type, value, traceback); }  // with none kept: clears
  ErrorStash(const ErrorStash&) = delete;
  ErrorStash& operator=(const ErrorStash&) = delete;
};

// Turns the Python error that is set (raised by Python code jitbridge called while reading
// `message`'s subject: an __index__, a __bool__, a __str__) into `type`("<message> (<Type>: <text>)")
// with the original as __cause__, when the original is an ordinary Exception. KeyboardInterrupt,
// SystemExit, MemoryError and the like are re-raised unchanged. Always throws py::error_already_set
// (also when no error was set: then `type`(message) alone).
[[noreturn]] void raise_from_current(PyObject* type, const std::string& message);

// repr(obj) for an error message, at most ~80 characters; "<a T>" when repr() fails (its error is
// dropped: it must not replace the error being reported). Never throws.
std::string describe(PyObject* obj) noexcept;
// str(exc) of an exception object, "" when that fails. Never throws.
std::string exception_text(PyObject* exc) noexcept;

// dict[key] as a new reference, null when absent (no error set). A lookup that raised (a key's
// __eq__) throws py::error_already_set. No borrowed reference survives the call.
py::object dict_item(PyObject* dict, PyObject* key);
// sys.modules[name] as a new reference, or null when the module is not imported. Never imports.
// Throws py::error_already_set if reading sys.modules raised.
py::object loaded_module(const char* name);

// ---- ints ---------------------------------------------------------------------------------
enum class IntRead {
  ok,
  not_int,       // a bool, or no __index__
  index_failed,  // __index__ raised: the Python error is set
  overflow,      // does not fit the target type
  negative,      // read_uint64 only
};
// An int (any object with __index__, never a bool) into `out`. May run __index__: hold a strong
// reference to `v`. Never throws.
IntRead read_int64(PyObject* v, std::int64_t& out) noexcept;
// The same into [0, 2**64): negative -> IntRead::negative, above -> overflow.
IntRead read_uint64(PyObject* v, std::uint64_t& out) noexcept;
// Raises the error for a failed read of `v`: TypeError "<subject> holds a <type>, not an int";
// TypeError "<subject> holds a <type> whose __index__() failed" (from the original); OverflowError
// "<subject> holds <v>, which is out of the 64-bit range"; ValueError "<subject> is negative (<v>)".
// `index` >= 0 adds " (entry <index>)".
[[noreturn]] void raise_int_error(IntRead status, PyObject* v, const Subject& subject, std::ptrdiff_t index = -1);
// read_int64 / read_uint64, throwing raise_int_error's errors.
std::int64_t int64_of(PyObject* v, const Subject& subject, std::ptrdiff_t index = -1);
std::uint64_t uint64_of(PyObject* v, const Subject& subject);

// ---- text and sequences -----------------------------------------------------------------------
// The UTF-8 text of str `s` (a str subclass too), valid while `s` lives. ValueError "<subject> is
// not valid text" (from the UnicodeEncodeError) for lone surrogates.
std::string_view utf8_of(PyObject* s, const Subject& subject);
// str(obj) as a new reference; TypeError "<subject>: str() raised ..." (from the original) when
// __str__ raises.
py::object str_of(PyObject* obj, const Subject& subject);

// A snapshot of the items of `seq` that Python code cannot change while they are read: a tuple (or
// a tuple subclass) itself, a list (or list subclass) copied into a new tuple, else, when
// `any_iterable`, the first kMaxNdim + 1 items of its iterator (jitbridge/array.hpp: the most
// dimensions a view may have; longer sequences are refused before anything is allocated for them). Throws TypeError "<subject> is a
// <type>, not a tuple" (`any_iterable` false, or not iterable), ValueError "<subject> has more
// than kMaxNdim entries", and what iterating raised (named, from the original).
py::tuple items_of(PyObject* seq, const Subject& subject, bool any_iterable);

}  // namespace jitbridge::python
