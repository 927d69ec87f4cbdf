// internals.cpp — the `_core._internals` capsule (internals.hpp): the few reads of _core's own state that the
// test-only extension jitbridge_testing needs (the adapter a type got, the CuPy stream reader, a Tensor's buffer
// owners, a kernel's shortcut launches and its driver function for the launch benchmarks' floors), as plain C calls.
#include <fmt/format.h>

#include "bindings.hpp"
#include "internals.hpp"
#include "interop/array_support.hpp"
#include "interop/interop_objects.hpp"
#include "launch/kernels.hpp"

namespace jitbridge::python {
namespace {

const char* protocol_name(Protocol p) noexcept {
  switch (p) {
    case Protocol::jitbridge: return "jitbridge";
    case Protocol::exchange_api: return "exchange_api";
    case Protocol::dlpack: return "dlpack";
    case Protocol::cuda_array_interface: return "cuda_array_interface";
    case Protocol::cupy_fields: return "cupy_fields";
    case Protocol::numba_fields: return "numba_fields";
    case Protocol::none: break;
  }
  return "none";
}

const char* adapter_protocol(PyObject* type) {
  if (!type || !PyType_Check(type)) {
    PyErr_SetString(PyExc_TypeError, "adapter_protocol: expected a type");
    return nullptr;
  }
  return protocol_name(adapter_for(reinterpret_cast<PyTypeObject*>(type)).protocol);  // never throws
}

const char* stream_reader() { return cupy_stream_reader(); }

long tensor_buffer_refs(PyObject* tensor) {
  TensorObject* t = tensor ? tensor_object(tensor) : nullptr;
  if (!t) {
    PyErr_SetString(PyExc_TypeError, "buffer_refs: expected a jitbridge.Tensor");
    return -1;
  }
  return t->tensor.buffer().use_count();
}

PyObject* kernel_use_target(PyObject* kernel, const char* target) {
  try {
    py::handle h(kernel);
    if (!h || !py::isinstance<KernelObject>(h)) throw py::type_error("use_target: expected a RawKernel");
    const KernelObject& k = h.cast<const KernelObject&>();
    const Device& device = Device::get(current_device());
    if (target) {
      const Module& m = k.module->modules->module_for_target(target);
      k.launch->rebind(device, m.function(k.launch->lookup_name()));
      k.checked_device = nullptr;  // the next launch binds the forced function
      k.function = nullptr;
    }
    const Function& f = k.resolved(device);
    py::list built;
    for (const std::string& t : k.module->modules->targets()) built.append(text(t));
    const Program* p = f.module().program();
    return py::make_tuple(text(p ? p->arch : "image"), built).release().ptr();
  } catch (...) {
    return translate_current_exception();
  }
}

long long kernel_shortcut_launches(PyObject* kernel) {
  py::handle h(kernel);
  if (!h || !py::isinstance<KernelObject>(h)) {
    PyErr_SetString(PyExc_TypeError, "shortcut_launches: expected a RawKernel");
    return -1;
  }
  const KernelObject& k = h.cast<const KernelObject&>();
  std::uint64_t n = 0;
  for (const std::unique_ptr<LaunchShortcut>& s : k.shortcuts) n += s->launches;
  return static_cast<long long>(n);
}

int kernel_function(PyObject* kernel, int device, CUfunction* function, CUkernel* handle) {
  try {
    py::handle h(kernel);
    if (!h || !py::isinstance<KernelObject>(h)) throw py::type_error("kernel_function: expected a RawKernel");
    const KernelObject& k = h.cast<const KernelObject&>();
    const Device& d = Device::get(device);
    const Function& f = k.resolved(d);
    d.make_current();
    *function = f.function_for(d);
    *handle = f.handle();
    return 0;
  } catch (...) {
    translate_current_exception();
  }
  return -1;
}

const JitbridgeInternals kInternals = {
    kInternalsVersion, static_cast<std::uint32_t>(sizeof(JitbridgeInternals)),
    adapter_protocol,  stream_reader,
    tensor_buffer_refs, kernel_use_target,
    kernel_shortcut_launches, kernel_function,
};

}  // namespace

void bind_internals(py::module_& m) {
  PyObject* capsule = PyCapsule_New(const_cast<JitbridgeInternals*>(&kInternals), kInternalsCapsule, nullptr);
  if (!capsule) throw py::error_already_set();
  m.attr("_internals") = py::reinterpret_steal<py::object>(capsule);
}

}  // namespace jitbridge::python
