// errors.cpp — C++ exceptions to the Python exception classes defined in jitbridge/_errors.py.
#include <exception>

#include "bindings.hpp"
#include "interop/interop_objects.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/driver.hpp"
#include "jitbridge/launcher.hpp"

namespace jitbridge::python {
namespace {

struct ErrorClasses {
  py::object compile_error, nvrtc_error, no_driver_error, driver_error, launch_error, cuda_not_found_error;
};

// Imported once, at module import, and kept for the life of the process (never destroyed, so
// nothing is released after the interpreter is gone).
const ErrorClasses& error_classes() {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<ErrorClasses> storage;
  return storage
      .call_once_and_store_result([] {
        py::module_ errors = py::module_::import("jitbridge._errors");
        return ErrorClasses{errors.attr("CompileError"), errors.attr("NvrtcError"),
                            errors.attr("NoDriverError"), errors.attr("DriverError"),
                            errors.attr("LaunchError"), errors.attr("CudaNotFoundError")};
      })
      .get_stored();
}

py::object none_if(bool absent, py::object value) { return absent ? py::none() : std::move(value); }

// Sets the Python error to cls(*args, **kwargs); a translator must not throw.
void raise(const py::object& cls, const char* what, py::tuple args, py::dict kwargs) noexcept {
  try {
    py::object exc = cls(*args, **kwargs);
    PyErr_SetObject(cls.ptr(), exc.ptr());
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, what);
  }
}

void raise_compile_error(const CompileError& e) noexcept {
  try {
    const CompileError::Details& d = e.details();
    py::tuple options(d.options.size());
    for (std::size_t i = 0; i < d.options.size(); ++i) options[i] = text(d.options[i]);
    py::dict kw;
    kw["log"] = text(d.log);
    kw["program_name"] = text(d.program_name);
    kw["options"] = options;
    kw["kernel"] = none_if(d.kernel.empty(), text(d.kernel));
    kw["line"] = none_if(d.line <= 0, py::int_(d.line));
    kw["column"] = none_if(d.column <= 0, py::int_(d.column));
    kw["message"] = text(d.message);
    kw["source_line"] = none_if(d.source_line.empty(), text(d.source_line));
    kw["file"] = none_if(d.file.empty(), text(d.file));
    kw["name_expression"] = none_if(d.name_expression < 0, py::int_(d.name_expression));
    raise(error_classes().compile_error, e.what(), py::make_tuple(text(e.what())), kw);
  } catch (py::error_already_set& err) {
    err.restore();
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

void raise_simple(const py::object& cls, const std::exception& e, py::dict kwargs = py::dict()) noexcept {
  try {
    raise(cls, e.what(), py::make_tuple(text(e.what())), std::move(kwargs));
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace

void bind_errors(py::module_& m) {
  const ErrorClasses& classes = error_classes();
  m.attr("CompileError") = classes.compile_error;
  m.attr("NvrtcError") = classes.nvrtc_error;
  m.attr("NoDriverError") = classes.no_driver_error;
  m.attr("DriverError") = classes.driver_error;
  m.attr("LaunchError") = classes.launch_error;
  m.attr("CudaNotFoundError") = classes.cuda_not_found_error;

  // std::invalid_argument -> ValueError and std::out_of_range -> IndexError stay pybind11's.
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CompileError& e) {
      raise_compile_error(e);
    } catch (const CudaNotFoundError& e) {  // before NvrtcError, its base
      raise_simple(error_classes().cuda_not_found_error, e);
    } catch (const NvrtcError& e) {
      raise_simple(error_classes().nvrtc_error, e);
    } catch (const NoDriverError& e) {
      raise_simple(error_classes().no_driver_error, e);
    } catch (const LaunchError& e) {
      py::dict kw;
      kw["code"] = static_cast<int>(e.code());
      raise_simple(error_classes().launch_error, e, std::move(kw));
    } catch (const LaunchConfigError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const ArgumentError& e) {
      PyErr_SetString(e.kind() == ArgumentError::Kind::type       ? PyExc_TypeError
                      : e.kind() == ArgumentError::Kind::overflow ? PyExc_OverflowError
                                                                  : PyExc_ValueError,
                      e.what());
    } catch (const InteropError& e) {
      PyErr_SetString(interop_exception_type(e.kind()), e.what());
    } catch (const DriverError& e) {
      py::dict kw;
      kw["code"] = static_cast<int>(e.code());
      raise_simple(error_classes().driver_error, e, std::move(kw));
    }
  });
}

}  // namespace jitbridge::python
