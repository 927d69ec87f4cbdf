// descriptor_reads.cpp — read_attribute (descriptor_reads.hpp): a data descriptor resolved once per type version.
#include "common/descriptor_reads.hpp"

namespace jitbridge::python {
namespace {

// After a successful PyObject_GetAttr(obj, name) on `type`: remembers the data descriptor that read came from, or
// that there is none (another getattro, an instance attribute, a non-data descriptor).
void resolve(PyTypeObject* type, PyObject* name, DescriptorRead& r) noexcept {
  PyObject* d = type->tp_getattro == PyObject_GenericGetAttr ? _PyType_Lookup(type, name) : nullptr;  // borrowed
  const bool data = d && Py_TYPE(d)->tp_descr_get && Py_TYPE(d)->tp_descr_set;
  const unsigned int version = type->tp_version_tag;  // read after the lookup, which assigns one if needed
  PyObject* old = r.descr;
  if (data) Py_INCREF(d);
  r.type = type;
  r.version = version;
  r.descr = data ? d : nullptr;
  Py_XDECREF(old);  // last: its finalizer cannot see `r` half made
}

}  // namespace

PyObject* read_attribute(PyObject* obj, PyObject* name, DescriptorRead& r) noexcept {
  PyTypeObject* type = Py_TYPE(obj);
  if (type == r.type && r.version != 0 && type->tp_version_tag == r.version) {
    if (!r.descr) return PyObject_GetAttr(obj, name);
    // What PyObject_GenericGetAttr does with a data descriptor, holding it for the call as it does (the getter may
    // run Python code that resolves `r` again and drops the reference `r` holds).
    PyObject* d = r.descr;
    Py_INCREF(d);
    PyObject* v = Py_TYPE(d)->tp_descr_get(d, obj, reinterpret_cast<PyObject*>(type));
    Py_DECREF(d);
    return v;
  }
  PyObject* v = PyObject_GetAttr(obj, name);
  if (v) resolve(type, name, r);
  return v;
}

}  // namespace jitbridge::python
