// warnings.cpp — routes jitbridge's C++ warnings (an unusable cache directory, ...) to Python's warnings.warn.
#include <cstdio>
#include <string>

#include "bindings.hpp"

namespace jitbridge::python {
namespace {

bool python_is_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

void to_stderr(const std::string& message) noexcept {
  std::fprintf(stderr, "jitbridge: warning: %s\n", message.c_str());
}

// Called from any thread, with or without the GIL; never throws. If warnings.warn raises (a
// filter turned RuntimeWarning into an error), the exception cannot cross the C++ caller: the
// warning is printed to stderr instead.
void warn_in_python(const std::string& message) noexcept {
  if (!Py_IsInitialized() || python_is_finalizing()) return to_stderr(message);
  try {
    py::gil_scoped_acquire gil;
    try {
      py::module_::import("warnings").attr("warn")(text(message), py::handle(PyExc_RuntimeWarning));
    } catch (py::error_already_set&) {
      to_stderr(message);
    }
  } catch (...) {
    to_stderr(message);
  }
}

}  // namespace

void install_warning_handler() { set_warning_handler(&warn_in_python); }

}  // namespace jitbridge::python
