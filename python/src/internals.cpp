// internals.cpp — the `_core._internals` capsule (internals.hpp): the few reads of _core's own state that the
// test-only extension jitbridge_testing needs (the adapter a type got, the CuPy stream reader, a Tensor's buffer
// owners, a kernel's shortcuts and their launches, its packed arguments and its driver function for the launch
// benchmarks' floors), as plain C calls.
#include <fmt/format.h>

#include <iterator>

#include "bindings.hpp"
#include "common/initialised.hpp"
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

// The kernel inside `kernel` for the hook `what`: a constructed jitbridge._core._Kernel (RawKernel, or another
// subclass). Throws TypeError naming `what` and the type given otherwise (and for an instance never initialised).
const KernelObject& kernel_of(PyObject* kernel, const char* what) {
  PyTypeObject* type = py::detail::get_type_info(typeid(KernelObject))->type;
  if (!kernel || !PyObject_TypeCheck(kernel, type))
    throw py::type_error(fmt::format("{}: kernel: expected a RawKernel (jitbridge._core._Kernel), got {}", what,
                                     kernel ? type_name(kernel) : std::string("NULL")));
  return value_of<KernelObject>(kernel);
}

PyObject* kernel_use_target(PyObject* kernel, const char* target) {
  try {
    const KernelObject& k = kernel_of(kernel, "use_target");
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
  try {
    const KernelObject& k = kernel_of(kernel, "shortcut_launches");
    std::uint64_t n = 0;
    for (const std::unique_ptr<LaunchShortcut>& s : k.shortcuts) n += s->launches;
    return static_cast<long long>(n);
  } catch (...) {
    translate_current_exception();
  }
  return -1;
}

int kernel_function(PyObject* kernel, int device, CUfunction* function, CUkernel* handle) {
  try {
    const KernelObject& k = kernel_of(kernel, "kernel_function");
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

// ShortcutArg::Kind's names, in the enum's order.
constexpr const char* kShortcutKinds[] = {"exchange_array", "cupy_array",    "numba_array", "null_pointer",
                                          "integer",        "index_integer", "boolean",     "floating",
                                          "buffer",         "numpy_scalar"};
static_assert(std::size(kShortcutKinds) == static_cast<std::size_t>(ShortcutArg::Kind::numpy_scalar) + 1);

PyObject* kernel_shortcuts(PyObject* kernel) {
  try {
    const KernelObject& k = kernel_of(kernel, "kernel_shortcuts");
    py::list out;
    // Indexed, not iterated: appending allocates, which may collect garbage and run a finalizer that launches this
    // kernel, and a launch may learn a shortcut (the vector grows; its shortcuts themselves stay where they are).
    for (std::size_t i = 0; i < k.shortcuts.size(); ++i) {
      const LaunchShortcut& s = *k.shortcuts[i];
      py::list types, how;
      for (const ShortcutArg& a : s.args) {
        types.append(py::handle(reinterpret_cast<PyObject*>(a.type)));
        how.append(kShortcutKinds[static_cast<std::size_t>(a.kind)]);
      }
      out.append(py::make_tuple(py::tuple(types), s.usable, py::tuple(how)));
    }
    return out.release().ptr();
  } catch (...) {
    return translate_current_exception();
  }
}

PyObject* kernel_pack(PyObject* kernel, PyObject* const* args, Py_ssize_t nargs) {
  try {
    const KernelObject& k = kernel_of(kernel, "pack_args");
    return pack_from_python(k, args, nargs).release().ptr();
  } catch (...) {
    return translate_current_exception();
  }
}

const JitbridgeInternals kInternals = {
    kInternalsVersion, static_cast<std::uint32_t>(sizeof(JitbridgeInternals)),
    adapter_protocol,  stream_reader,
    tensor_buffer_refs, kernel_use_target,
    kernel_shortcut_launches, kernel_function,
    kernel_shortcuts, kernel_pack,
};

}  // namespace

void bind_internals(py::module_& m) {
  PyObject* capsule = PyCapsule_New(const_cast<JitbridgeInternals*>(&kInternals), kInternalsCapsule, nullptr);
  if (!capsule) throw py::error_already_set();
  m.attr("_internals") = py::reinterpret_steal<py::object>(capsule);
}

}  // namespace jitbridge::python
