// vectorcall.hpp — vectorcall for pybind11 classes whose instances are called per launch (the kernel types, and the
// test module's benchmark floor): the slot lives after pybind11's instance, installed at the first call.
#pragma once

#include <Python.h>

namespace jitbridge::python {

// The instance's vectorcall slot (set_up_vectorcall put it after pybind11's instance). tp_call installs the
// vectorcall there at the first call (pybind11 makes the instances, so it cannot be filled at construction); later
// calls skip building an argument tuple.
inline vectorcallfunc& vectorcall_slot(PyObject* self) {
  return *reinterpret_cast<vectorcallfunc*>(reinterpret_cast<char*>(self) + Py_TYPE(self)->tp_vectorcall_offset);
}

// For py::custom_type_setup: enlarges the instance by the slot and makes `call` the type's tp_call.
inline void set_up_vectorcall(PyHeapTypeObject* heap, ternaryfunc call) {
  PyTypeObject& t = heap->ht_type;
  t.tp_vectorcall_offset = t.tp_basicsize;
  t.tp_basicsize += static_cast<Py_ssize_t>(sizeof(vectorcallfunc));
  t.tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
  t.tp_call = call;
}

}  // namespace jitbridge::python
