// c_api_capsule.cpp — the `_core._c_api` capsule: the core's C interface table (jitbridge/c_api.h) with
// kernel_from_python filled in, so native add-ons launch _core's kernels with _core's own caches and no Python; and
// `_core._xla_ffi_handler`, the generic XLA FFI handler (jitbridge/xla_ffi.hpp) that jitbridge.jax registers.
#include <stdexcept>
#include <string>

#include "bindings.hpp"
#include "jitbridge/c_api.hpp"
#include "jitbridge/xla_ffi.hpp"
#include "launch/kernels.hpp"

namespace jitbridge::python {
namespace {

// A jitbridge.RawKernel's handle: shares its ModuleSet (so modules loaded by Python launches serve the native ones
// too). GIL held by the caller (c_api.h says so).
int kernel_from_python(void* py_kernel, jitbridge_kernel** out) {
  if (!out) return c_api::set_error(JITBRIDGE_ERROR_VALUE, "kernel_from_python: out is NULL");
  *out = nullptr;
  py::handle h(static_cast<PyObject*>(py_kernel));
  if (!h || !py::isinstance<KernelObject>(h))
    return c_api::set_error(JITBRIDGE_ERROR_TYPE, "kernel_from_python: the object is not a jitbridge.RawKernel");
  try {
    const KernelObject& k = h.cast<const KernelObject&>();
    *out = c_api::make_kernel(k.launch);
    return JITBRIDGE_OK;
  } catch (...) {
    return c_api::set_error(JITBRIDGE_ERROR_INTERNAL, "kernel_from_python: out of host memory");
  }
}

JitbridgeCApi make_table() {
  JitbridgeCApi table = c_api::core_table();
  table.kernel_from_python = kernel_from_python;
  return table;
}

const JitbridgeCApi kTable = make_table();

}  // namespace

void bind_c_api(py::module_& m) {
  PyObject* capsule = PyCapsule_New(const_cast<JitbridgeCApi*>(&kTable), JITBRIDGE_C_API_CAPSULE, nullptr);
  if (!capsule) throw py::error_already_set();
  m.attr("_c_api") = py::reinterpret_steal<py::object>(capsule);
  // The handler's address, as jax.ffi.register_ffi_target takes it (jaxlib reads the pointer whatever the name).
  // The function is part of _core: valid while the process runs.
  PyObject* handler = PyCapsule_New(reinterpret_cast<void*>(&jitbridge_xla_ffi_handler), "xla._CUSTOM_CALL_TARGET",
                                    nullptr);
  if (!handler) throw py::error_already_set();
  m.attr("_xla_ffi_handler") = py::reinterpret_steal<py::object>(handler);
  m.def(
      "_xla_ffi_prepare",
      [](const py::bytes& payload, int device) {
        std::string text = payload;  // copied: the call runs without the GIL
        char why[2048] = "";
        int rc = 0;
        {
          py::gil_scoped_release release;
          rc = jitbridge_xla_ffi_prepare(text.data(), text.size(), device, why, sizeof why);
        }
        if (rc != 0) throw std::runtime_error(std::string("jitbridge XLA FFI call: ") + why);
      },
      py::arg("payload"), py::arg("device"),
      "Parses a jitbridge.jax call payload (bytes) into the FFI handler's table, compiles its kernels and loads them "
      "on CUDA device `device` (what XLA's initialize stage does), so modules are loaded before XLA runs or records "
      "the call. Raises RuntimeError with the reason (bad payload, compile error, no driver).");
}

}  // namespace jitbridge::python
