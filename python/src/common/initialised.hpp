// initialised.hpp — methods of the bound classes that refuse an instance whose __init__ never ran (cls.__new__(cls)), which pybind11 would hand them as uninitialised memory.
#pragma once

#include <fmt/format.h>

#include <utility>

#include "bindings.hpp"

namespace jitbridge::python {

// value_of's cases other than a constructed instance of one pybind11 base (out of line: value_of's hit stays a few
// loads and tests).
template <class T>
[[gnu::noinline]] T& value_of_other(PyObject* self) {
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  if (!inst->simple_layout) {
    auto vh = inst->get_value_and_holder();
    if (vh.holder_constructed()) return *vh.template value_ptr<T>();
  }
  throw py::type_error(fmt::format("{}: the object was not initialised (call __init__)", Py_TYPE(self)->tp_name));
}

// The C++ object inside `self`, a pybind11 instance of T's Python type or of a subclass (the caller
// knows: a tp_call of that type). Throws TypeError when the object was never constructed (made by
// cls.__new__(cls) without __init__; pybind11 itself would then give out raw, uninitialised memory).
template <class T>
inline T& value_of(PyObject* self) {
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  // One pybind11 base (RawKernel(_Kernel) too): the value pointer sits in the instance itself,
  // without the per-call type lookup get_value_and_holder() does.
  if (inst->simple_layout && inst->simple_holder_constructed) return *static_cast<T*>(inst->simple_value_holder[0]);
  return value_of_other<T>(self);
}

// value_of after checking that `self` is an instance of T's Python type (an unbound method can be
// called on anything: TypeError then).
template <class T>
T& self_of(PyObject* self) {
  PyTypeObject* type = py::detail::get_type_info(typeid(T))->type;
  if (!PyObject_TypeCheck(self, type))
    throw py::type_error(fmt::format("expected a {} instance, got {}", type->tp_name, Py_TYPE(self)->tp_name));
  return value_of<T>(self);
}

namespace initialised_detail {
template <class F, class R, class T, class... A>
auto wrap(F f, R (F::*)(const T&, A...) const) {
  return [f](py::handle self, A... args) -> R { return f(self_of<T>(self.ptr()), std::forward<A>(args)...); };
}
}  // namespace initialised_detail

// `f`, a lambda whose first parameter is `const T&`, as a method or property getter of T's class
// that reaches `f` only for a constructed T (self_of; TypeError otherwise). Bind every method and
// getter of a class that Python can instantiate through __new__ alone with it.
template <class F>
auto initialised(F f) {
  return initialised_detail::wrap(std::move(f), &F::operator());
}

// A data member of T as a property getter, through initialised (for def_property_readonly where
// def_readonly would read an unconstructed T).
template <class T, class V>
auto initialised_field(V T::*member) {
  return initialised([member](const T& object) { return object.*member; });
}

}  // namespace jitbridge::python
