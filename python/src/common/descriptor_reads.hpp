// descriptor_reads.hpp — obj.<name> read through the data descriptor its type defines (a Cython attribute, a slot, a
// property), found once per type version instead of by a type lookup per read: what PyObject_GetAttr would return.
#pragma once

#include <Python.h>

namespace jitbridge::python {

// Where one attribute of one type lives: the data descriptor _PyType_Lookup found for it, remembered with the type's
// version tag (CPython gives a type a new tag whenever it or a base changes, and never reuses one). Keep one per
// attribute name in static storage (never destroyed); only touched with the GIL held. The descriptor reference it
// owns is dropped when it is resolved again for another type or version.
struct DescriptorRead {
  PyTypeObject* type = nullptr;   // compared only: the tag proves it is the same, unchanged type
  unsigned int version = 0;       // the type's tp_version_tag when resolved; 0: nothing resolved
  PyObject* descr = nullptr;      // owned; nullptr: the type has no data descriptor for the name (read generally)
};

// obj.<name> as a new reference, or nullptr with the Python error set: exactly what PyObject_GetAttr(obj, name)
// returns. When Py_TYPE(obj) is `r`'s type at `r`'s version, its data descriptor is called directly (the lookup
// PyObject_GenericGetAttr would make is skipped: a data descriptor of the type wins over the instance dict); otherwise
// PyObject_GetAttr reads it and `r` is resolved again for the type (only types using PyObject_GenericGetAttr qualify).
// `name` must be an interned str. GIL held; may run Python code (a property).
PyObject* read_attribute(PyObject* obj, PyObject* name, DescriptorRead& r) noexcept;

}  // namespace jitbridge::python
