// bindings.cpp — the helpers bindings.hpp declares (text, type names, exception translation), shared by every
// binding file of jitbridge._core and by the test-only jitbridge_testing.
#include <cstring>

#include "bindings.hpp"

namespace jitbridge::python {

py::str text(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

void not_made_directly(py::handle cls, const std::string& by) {
  const std::string name = py::str(cls.attr("__name__"));
  const std::string message = "jitbridge." + name + " is not made directly: " + by;
  const std::string doc = "Not made directly: " + by + ". Raises TypeError.";
  py::setattr(cls, "__init__",
              py::cpp_function([message](py::handle, py::args, py::kwargs) { throw py::type_error(message); },
                               py::name("__init__"), py::is_method(cls), py::doc(doc.c_str())));
}

std::string type_name(py::handle obj) {
  // From tp_name, with no Python code run (a metaclass's __name__ could raise or mutate): a heap
  // type's is its __name__, a static type's is "module.Name", of which __name__ is the last part.
  const char* full = Py_TYPE(obj.ptr())->tp_name;
  const char* dot = std::strrchr(full, '.');
  return dot ? std::string(dot + 1) : std::string(full);
}

PyObject* translate_current_exception() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (...) {
    py::detail::try_translate_exceptions();
  }
  return nullptr;
}

}  // namespace jitbridge::python
