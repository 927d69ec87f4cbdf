// scalar_args.hpp — launch arguments that are not arrays: how their types are classified, and read.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bindings.hpp"
#include "jitbridge/arguments.hpp"

namespace jitbridge::python {

// How a launch argument that is not an array is read, decided by its type alone (the full path
// and the shortcut agree through this): None; a bool (Python's or NumPy's); an integer (int and
// anything with __index__); a float (float and anything with __float__ that is not a buffer;
// numpy.float64 is a float, and numpy.float32 and numpy.float16 are floats too: by value, never as
// their bytes); a complex (complex and its subclasses such as numpy.complex128, and numpy.complex64;
// never as bytes); bytes; another buffer (bytearray, memoryview, NumPy structured scalars, NumPy's
// other floats such as longdouble); anything else (numpy.clongdouble included: no parameter type holds it).
enum class ScalarClass { none, boolean, integer, floating, bytes, buffer, other, complex };
ScalarClass classify_scalar(PyObject* o);
// 32 for exactly numpy.float32, 16 for exactly numpy.float16 (by the type's name: NumPy is never
// imported), else 0.
int numpy_float_bits(PyTypeObject* type);

// How to read a NumPy scalar of exactly this type in place: NumPy's scalar objects keep their value right after the
// object header (numpy/arrayscalars.h: PyObject_HEAD, then `obval`), in NumPy 1.x and 2.x alike. Known only for
// NumPy's int8..int64, uint8..uint64 (and longlong / ulonglong), float16, float32 and float64, recognised by the
// type's name, and only once the layout has been verified for that type (a value made by the type itself, read in
// place, equals what __index__ / __float__ give). kind none otherwise: read it as any Python number. GIL held.
struct NumpyScalar {
  enum class Kind : std::uint8_t { none, signed_integer, unsigned_integer, floating };
  Kind kind = Kind::none;
  std::uint8_t bytes = 0;  // the value's width
};
NumpyScalar numpy_scalar(PyTypeObject* type);
// The value of `o`, whose type numpy_scalar() described as `s` (kind floating): widened to double exactly.
double numpy_float_value(PyObject* o, NumpyScalar s) noexcept;
// The value of `o` (kind signed or unsigned integer) into `v`; false for a uint64 above INT64_MAX.
bool numpy_int64_value(PyObject* o, NumpyScalar s, long long& v) noexcept;

// An integer argument (ScalarClass::integer) that fits int64 into `v`: exact ints directly, others
// through __index__. False, with the Python error (if any) left set, otherwise. Inline: a small exact int (CPython
// 3.12+ keeps values below 2**30 compact) is read in place; any other by int64_argument_other (scalar_args.cpp).
bool int64_argument_other(PyObject* o, long long& v);
inline bool int64_argument(PyObject* o, long long& v) {
#if PY_VERSION_HEX >= 0x030C0000
  if (PyLong_CheckExact(o) && PyUnstable_Long_IsCompact(reinterpret_cast<PyLongObject*>(o))) {
    v = static_cast<long long>(PyUnstable_Long_CompactValue(reinterpret_cast<PyLongObject*>(o)));
    return true;
  }
#endif
  return int64_argument_other(o, v);
}

// A Python scalar, None, or bytes-like object (argument `i` of `kernel`) to `v`. Arrays are
// handled before this. Returns true when it took a buffer view of `o` into `buffer`, which the
// caller releases (PyBuffer_Release) after packing; `v` then borrows its bytes. Throws TypeError /
// OverflowError naming the argument (py::error_already_set) for what no parameter could take.
bool scalar_value(PyObject* o, std::size_t i, ArgValue& v, Py_buffer& buffer, const char* kernel);

}  // namespace jitbridge::python
