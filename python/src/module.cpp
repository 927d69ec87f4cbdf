// module.cpp — the jitbridge._core extension module: puts the pieces bound in the other files together.
#include <cstring>

#include "interop/arrays.hpp"
#include "bindings.hpp"
#include "launch/launch_profile.hpp"

namespace jitbridge::python {

py::str text(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

std::string type_name(py::handle obj) {
  // From tp_name, with no Python code run (a metaclass's __name__ could raise or mutate): a heap
  // type's is its __name__, a static type's is "module.Name", of which __name__ is the last part.
  const char* full = Py_TYPE(obj.ptr())->tp_name;
  const char* dot = std::strrchr(full, '.');
  return dot ? std::string(dot + 1) : std::string(full);
}

}  // namespace jitbridge::python

PYBIND11_MODULE(_core, m) {
  namespace jp = jitbridge::python;
  m.doc() = "jitbridge's compiled core: NVRTC compilation, the kernel cache and the environment. "
            "Use it through the jitbridge package.";
  jp::bind_errors(m);
  jp::bind_program(m);
  jp::bind_compile(m);
  jp::bind_cache(m);
  jp::bind_environment(m);
  jp::bind_arrays(m);
  jp::bind_tensors(m);
  jp::bind_kernels(m);
  jp::launch_profile::bind(m);
  jp::install_warning_handler();
}
