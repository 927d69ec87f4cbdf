// scalar_args.cpp — launch arguments that are not arrays (numbers, None, bytes, structured scalars)
// to ArgValues, and how their Python types are classified (the full path and the shortcut agree).
#include "launch/scalar_args.hpp"

#include <cuda_fp16.h>
#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "common/checked_args.hpp"

namespace jitbridge::python {
namespace {

[[noreturn]] void raise_now() { throw py::error_already_set(); }

}  // namespace

bool scalar_value(PyObject* o, std::size_t i, ArgValue& v, Py_buffer& buffer, const char* kernel) {
  v.python_type = Py_TYPE(o)->tp_name;
  switch (classify_scalar(o)) {
    case ScalarClass::none:
      v.kind = ArgValue::Kind::null_pointer;
      return false;
    case ScalarClass::boolean: {
      int truth = PyObject_IsTrue(o);
      if (truth < 0) raise_now();
      v.kind = ArgValue::Kind::boolean;
      v.i = truth;
      return false;
    }
    case ScalarClass::integer: {
      long long value = 0;
      if (PyLong_CheckExact(o) && int64_argument(o, value)) {  // the common case, without __index__
        v.kind = ArgValue::Kind::signed_integer;
        v.i = value;
        return false;
      }
      PyErr_Clear();
      py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(o));
      if (!as_int)
        raise_from_current(PyExc_TypeError, fmt::format("{}: argument {}: __index__() of the {} failed", kernel, i,
                                                        type_name(o)));
      int overflow = 0;
      value = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
      if (value == -1 && !overflow && PyErr_Occurred()) raise_now();
      auto too_big = [&] {  // describe(): str() of a huge int can fail (its digit limit), this must not
        const std::string message = fmt::format("{}: argument {}: {} does not fit in any integer parameter", kernel, i,
                                                describe(as_int.ptr()));
        PyErr_SetString(PyExc_OverflowError, message.c_str());
        raise_now();
      };
      if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(as_int.ptr());
        if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
          PyErr_Clear();
          too_big();
        }
        v.kind = ArgValue::Kind::unsigned_integer;
        v.u = u;
      } else if (overflow < 0) {
        too_big();
      } else {
        v.kind = ArgValue::Kind::signed_integer;
        v.i = value;
      }
      return false;
    }
    case ScalarClass::floating: {
      // numpy.float32 / numpy.float16 through __float__: their values are doubles exactly.
      double d = PyFloat_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred())
        raise_from_current(PyExc_TypeError, fmt::format("{}: argument {}: float() of the {} failed", kernel, i,
                                                        type_name(o)));
      v.kind = ArgValue::Kind::floating;
      v.f = d;
      const int bits = numpy_float_bits(Py_TYPE(o));
      v.float_bits = static_cast<std::uint8_t>(bits ? bits : 64);
      return false;
    }
    case ScalarClass::complex: {
      // complex and its subclasses directly; numpy.complex64 through __complex__ (its float parts
      // become doubles exactly).
      const Py_complex c = PyComplex_AsCComplex(o);
      if (c.real == -1.0 && PyErr_Occurred())
        raise_from_current(PyExc_TypeError, fmt::format("{}: argument {}: complex() of the {} failed", kernel, i,
                                                        type_name(o)));
      v.kind = ArgValue::Kind::complex;
      v.f = c.real;
      v.im = c.imag;
      v.complex_single = !PyComplex_Check(o);
      return false;
    }
    case ScalarClass::bytes:
      v.kind = ArgValue::Kind::bytes;
      v.data = PyBytes_AS_STRING(o);
      v.size = static_cast<std::size_t>(PyBytes_GET_SIZE(o));
      return false;
    case ScalarClass::buffer:
      // bytearray, memoryview, NumPy structured scalars (np.void): the bytes, as they are.
      if (PyObject_GetBuffer(o, &buffer, PyBUF_C_CONTIGUOUS) != 0) raise_now();
      v.kind = ArgValue::Kind::bytes;
      v.data = buffer.buf;
      v.size = static_cast<std::size_t>(buffer.len);
      return true;
    case ScalarClass::other:
      break;
  }
  PyErr_Format(PyExc_TypeError,
               "%s: argument %zu: cannot pass a %s (expected an array, a number, None, or bytes for a struct)",
               kernel, i, Py_TYPE(o)->tp_name);
  raise_now();
}

ScalarClass classify_scalar(PyObject* o) {
  PyTypeObject* type = Py_TYPE(o);
  if (type == &PyLong_Type) return ScalarClass::integer;
  if (o == Py_None) return ScalarClass::none;
  if (PyBool_Check(o) || std::strcmp(type->tp_name, "numpy.bool") == 0 || std::strcmp(type->tp_name, "numpy.bool_") == 0)
    return ScalarClass::boolean;
  if (PyLong_Check(o) || PyIndex_Check(o)) return ScalarClass::integer;
  if (PyComplex_Check(o) || std::strcmp(type->tp_name, "numpy.complex64") == 0) return ScalarClass::complex;
  if (std::strcmp(type->tp_name, "numpy.clongdouble") == 0 || std::strcmp(type->tp_name, "numpy.complex256") == 0)
    return ScalarClass::other;
  if (PyFloat_Check(o) || (type->tp_as_number && type->tp_as_number->nb_float && !PyObject_CheckBuffer(o)) ||
      numpy_float_bits(type) != 0)
    return ScalarClass::floating;
  if (PyBytes_Check(o)) return ScalarClass::bytes;
  if (PyObject_CheckBuffer(o)) return ScalarClass::buffer;
  return ScalarClass::other;
}

namespace {

// Where a scalar of `bytes` bytes sits in a NumPy scalar object: after the header, aligned to its size.
constexpr std::size_t numpy_value_offset(std::size_t bytes) {
  return (sizeof(PyObject) + bytes - 1) / bytes * bytes;
}

const unsigned char* numpy_value(PyObject* o, NumpyScalar s) noexcept {
  return reinterpret_cast<const unsigned char*>(o) + numpy_value_offset(s.bytes);
}

// The type's name to what it should hold; none for anything else (subclasses have names of their own).
NumpyScalar numpy_scalar_by_name(const char* name) {
  using K = NumpyScalar::Kind;
  if (std::strncmp(name, "numpy.", 6) != 0) return {};
  struct Known {
    const char* name;
    NumpyScalar scalar;
  };
  static constexpr Known known[] = {
      {"int8", {K::signed_integer, 1}},    {"int16", {K::signed_integer, 2}},    {"int32", {K::signed_integer, 4}},
      {"int64", {K::signed_integer, 8}},   {"longlong", {K::signed_integer, 8}}, {"uint8", {K::unsigned_integer, 1}},
      {"uint16", {K::unsigned_integer, 2}}, {"uint32", {K::unsigned_integer, 4}},
      {"uint64", {K::unsigned_integer, 8}}, {"ulonglong", {K::unsigned_integer, 8}},
      {"float16", {K::floating, 2}},       {"float32", {K::floating, 4}},        {"float64", {K::floating, 8}},
  };
  for (const Known& k : known)
    if (std::strcmp(name + 6, k.name) == 0) return k.scalar;
  return {};
}

// Makes type(42) (type(1.5) for floats) and reads it both ways: in place, and as Python does.
bool numpy_layout_verified(PyTypeObject* type, NumpyScalar s) {
  if (type->tp_basicsize < static_cast<Py_ssize_t>(numpy_value_offset(s.bytes) + s.bytes)) return false;
  const bool floating = s.kind == NumpyScalar::Kind::floating;
  PyObject* probe = floating ? PyFloat_FromDouble(1.5) : PyLong_FromLong(42);
  if (!probe) {
    PyErr_Clear();
    return false;
  }
  PyObject* made = PyObject_CallOneArg(reinterpret_cast<PyObject*>(type), probe);
  Py_DECREF(probe);
  bool same = false;
  if (made && Py_TYPE(made) == type) {
    if (floating) {
      same = numpy_float_value(made, s) == 1.5;
    } else {
      long long v = 0;
      same = numpy_int64_value(made, s, v) && v == 42;
    }
  }
  Py_XDECREF(made);
  PyErr_Clear();
  return same;
}

}  // namespace

int numpy_float_bits(PyTypeObject* type) {
  // Exactly NumPy's float16 and float32 (by name: subclasses have their own), without importing NumPy.
  const NumpyScalar s = numpy_scalar_by_name(type->tp_name);
  return s.kind == NumpyScalar::Kind::floating && s.bytes < 8 ? 8 * s.bytes : 0;
}

NumpyScalar numpy_scalar(PyTypeObject* type) {
  // Verified once per type (NumPy's scalar types live as long as NumPy, which is never unloaded). GIL held.
  static std::vector<std::pair<PyTypeObject*, NumpyScalar>> seen;
  for (const auto& [t, s] : seen)
    if (t == type) return s;
  NumpyScalar s = numpy_scalar_by_name(type->tp_name);
  if (s.kind != NumpyScalar::Kind::none && !numpy_layout_verified(type, s)) s = {};
  if (s.kind != NumpyScalar::Kind::none) Py_INCREF(type);  // kept: `seen` compares by address
  seen.emplace_back(type, s);
  return s;
}

double numpy_float_value(PyObject* o, NumpyScalar s) noexcept {
  const unsigned char* p = numpy_value(o, s);
  if (s.bytes == 2) {  // float16: through float, exactly (cuda_fp16.h's host conversion)
    __half_raw h;
    std::memcpy(&h.x, p, 2);
    return __half2float(__half(h));
  }
  if (s.bytes == 4) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  double d;
  std::memcpy(&d, p, 8);
  return d;
}

bool numpy_int64_value(PyObject* o, NumpyScalar s, long long& v) noexcept {
  const unsigned char* p = numpy_value(o, s);
  if (s.kind == NumpyScalar::Kind::signed_integer) {
    switch (s.bytes) {
      case 1: { std::int8_t x; std::memcpy(&x, p, 1); v = x; return true; }
      case 2: { std::int16_t x; std::memcpy(&x, p, 2); v = x; return true; }
      case 4: { std::int32_t x; std::memcpy(&x, p, 4); v = x; return true; }
      default: { std::int64_t x; std::memcpy(&x, p, 8); v = x; return true; }
    }
  }
  std::uint64_t u = 0;
  switch (s.bytes) {
    case 1: { std::uint8_t x; std::memcpy(&x, p, 1); u = x; break; }
    case 2: { std::uint16_t x; std::memcpy(&x, p, 2); u = x; break; }
    case 4: { std::uint32_t x; std::memcpy(&x, p, 4); u = x; break; }
    default: std::memcpy(&u, p, 8);
  }
  if (u > static_cast<std::uint64_t>(std::numeric_limits<long long>::max())) return false;
  v = static_cast<long long>(u);
  return true;
}

bool int64_argument_other(PyObject* o, long long& v) {
  int overflow = 0;
  if (PyLong_CheckExact(o)) {
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
  } else {
    PyObject* as_int = PyNumber_Index(o);
    if (!as_int) return false;
    v = PyLong_AsLongLongAndOverflow(as_int, &overflow);
    Py_DECREF(as_int);
  }
  return !overflow && !(v == -1 && PyErr_Occurred());
}

}  // namespace jitbridge::python
