// allocators.cpp — Python allocators (allocate(size, stream) / deallocate(ptr, size, stream)) behind jitbridge's
// Tensors: the checks of what allocate returns, deallocation from any thread, and set/get/scope in _core.
#include "interop/allocators.hpp"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>
#include <thread>

#include "common/py_keepalive.hpp"
#include "jitbridge/array.hpp"
#include "jitbridge/device.hpp"
#include "jitbridge/streams.hpp"

namespace jitbridge::python {
namespace {

// What cuMemAlloc guarantees; kernels (vector loads, Tensor views) may rely on it.
constexpr std::uintptr_t kAlignment = 256;

std::string type_of(PyObject* o) { return Py_TYPE(o)->tp_name; }

// deallocate(ptr, size, stream) on `allocator` (the GIL held). An exception becomes a RuntimeWarning (or, when
// warnings are errors, an unraisable-exception report): a free never raises into unrelated code. Never throws.
void deallocate_now(PyObject* allocator, std::uintptr_t ptr, std::size_t bytes, std::uintptr_t stream) noexcept {
  const py::error_scope pending;  // an exception already being raised (a failed allocate) is kept and restored
  try {
    py::handle(allocator).attr("deallocate")(ptr, bytes, stream);
  } catch (py::error_already_set& e) {
    try {
      const std::string message =
          fmt::format("jitbridge: {}.deallocate({:#x}, {}, {}) raised {}; the memory stays with that allocator",
                      type_of(allocator), ptr, bytes, stream, e.what());
      e.restore();
      PyErr_Clear();
      if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) != 0) PyErr_WriteUnraisable(allocator);
    } catch (...) {
      PyErr_Clear();
    }
  } catch (...) {
  }
}

// The int value of `o` (an int, or anything int() takes but bool and float), or nullopt when it is none of those.
// Throws std::invalid_argument for a negative or too large int (`what` says whose).
std::optional<std::uintptr_t> address_value(py::handle o, const std::string& what) {
  if (PyBool_Check(o.ptr()) || PyFloat_Check(o.ptr())) return std::nullopt;
  PyObject* as_int = PyLong_Check(o.ptr()) ? (Py_INCREF(o.ptr()), o.ptr()) : PyNumber_Long(o.ptr());
  if (!as_int) {
    PyErr_Clear();
    return std::nullopt;
  }
  const py::object owned = py::reinterpret_steal<py::object>(as_int);
  const unsigned long long value = PyLong_AsUnsignedLongLong(as_int);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw std::invalid_argument(
        fmt::format("{} is {}, not a device address", what, py::repr(owned).cast<std::string>()));
  }
  return static_cast<std::uintptr_t>(value);
}

class PyAllocator final : public DeviceAllocator {
 public:
  PyAllocator(py::handle obj, std::string label) : obj_(python_keepalive(obj.ptr())), label_(std::move(label)) {}
  PyObject* object() const noexcept { return static_cast<PyObject*>(obj_.get()); }

  // With the GIL (taken when this thread lacks it: the C interface's callers). Errors when the caller had the
  // GIL: the Python exception, or TypeError/ValueError for what allocate returned. Without: the same as a C++
  // exception (InteropError, std::invalid_argument, std::runtime_error), for the C interface's error codes.
  std::shared_ptr<DeviceBuffer> allocate(int device, std::size_t bytes, const StreamRef& stream) const override {
    if (interpreter_ending())
      throw std::runtime_error(fmt::format("{}: the interpreter is shutting down; a Python allocator cannot run",
                                           label_));
    const bool had_gil = PyGILState_Check() != 0;
    py::gil_scoped_acquire gil;
    try {
      return allocate_with_gil(device, bytes, stream);
    } catch (py::type_error& e) {
      if (had_gil) throw;
      throw InteropError(InteropError::Kind::type, e.what());
    } catch (py::error_already_set& e) {
      if (had_gil) throw;
      throw std::runtime_error(fmt::format("{}: {}.allocate raised {}", label_, type_of(object()), e.what()));
    }
  }

 private:
  std::shared_ptr<DeviceBuffer> allocate_with_gil(int device, std::size_t bytes, const StreamRef& stream) const {
    PyObject* a = object();
    const std::uintptr_t s = stream_to_int(stream.handle);
    const py::object device_id = py::getattr(a, "device_id", py::none());  // cuda.core's resources serve one device
    if (PyLong_Check(device_id.ptr()) && !PyBool_Check(device_id.ptr()) && device_id.cast<long long>() != device)
      throw std::invalid_argument(fmt::format("{}: the {} serves device {} (its device_id); the tensor is on cuda:{}",
                                              label_, type_of(a), device_id.cast<long long>(), device));
    const std::string call = fmt::format("{}: {}.allocate({}, {})", label_, type_of(a), bytes, s);
    py::object result = py::handle(a).attr("allocate")(bytes, s);
    std::optional<std::uintptr_t> ptr;
    std::optional<std::uintptr_t> size;  // what the result says it holds, where it says so
    if (!(ptr = address_value(result, call + "'s result"))) {
      for (const char* name : {"ptr", "handle"}) {
        if (!py::hasattr(result, name)) continue;
        ptr = address_value(result.attr(name), fmt::format("{}'s result's .{}", call, name));
        if (!ptr)
          throw py::type_error(fmt::format("{} returned a {} whose .{} is a {}, not an int", call,
                                           type_of(result.ptr()), name, type_of(result.attr(name).ptr())));
        break;
      }
      if (!ptr)
        throw py::type_error(fmt::format("{} returned a {}: expected a device address (an int) or a buffer with an "
                                         "int .ptr or .handle",
                                         call, type_of(result.ptr())));
      for (const char* name : {"size", "nbytes"}) {
        if (!py::hasattr(result, name)) continue;
        size = address_value(result.attr(name), fmt::format("{}'s result's .{}", call, name));
        break;
      }
    }
    std::string problem;
    if (*ptr == 0)
      problem = "a null address";
    else if (*ptr % kAlignment)
      problem = fmt::format("address {:#x}, not aligned to {} bytes as cuMemAlloc's are", *ptr, kAlignment);
    else if (*ptr > UINTPTR_MAX - bytes)
      problem = fmt::format("address {:#x}, where {} bytes wrap around", *ptr, bytes);
    else if (size && *size < bytes)
      problem = fmt::format("a buffer of {} bytes", *size);
    if (!problem.empty()) {
      if (*ptr) deallocate_now(a, *ptr, bytes, s);  // what it gave goes back
      throw std::invalid_argument(fmt::format("{} returned {}; asked for {} bytes", call, problem, bytes));
    }
    std::shared_ptr<void> keep = python_keepalive(result.ptr());  // dropped after deallocate()
    std::shared_ptr<void> allocator = obj_;
    DeviceBuffer::Release release = [allocator, keep](CUdeviceptr p, std::size_t n, const StreamRef& on) {
      call_with_gil([allocator, keep, p, n, on] {
        deallocate_now(static_cast<PyObject*>(allocator.get()), static_cast<std::uintptr_t>(p), n,
                       stream_to_int(on.handle));
      });
    };
    try {
      return DeviceBuffer::adopt(device, static_cast<CUdeviceptr>(*ptr), bytes, stream, std::move(release));
    } catch (...) {
      deallocate_now(a, *ptr, bytes, s);
      throw;
    }
  }

  std::shared_ptr<void> obj_;  // the allocator object; its release is safe on any thread (python_keepalive)
  std::string label_;          // names it in errors: "empty(allocator)", "allocator"
};

void check_protocol(py::handle allocator, const char* arg) {
  for (const char* name : {"allocate", "deallocate"}) {
    const py::object method = py::getattr(allocator, name, py::none());
    if (!PyCallable_Check(method.ptr()))
      throw py::type_error(fmt::format("{}: a {} is no allocator: it needs methods allocate(size, stream) and "
                                       "deallocate(ptr, size, stream) (cuda.core's MemoryResource shape); it has no "
                                       "callable .{}",
                                       arg, type_of(allocator.ptr()), name));
  }
}

py::object object_of(const std::shared_ptr<DeviceAllocator>& allocator) {
  const auto* p = dynamic_cast<const PyAllocator*>(allocator.get());
  return p ? py::reinterpret_borrow<py::object>(p->object()) : py::none();
}

// What _enter_allocator_scope hands out: the scope to restore, for the thread that entered.
struct ScopeToken {
  AllocatorScope previous;
  std::thread::id thread = std::this_thread::get_id();
  bool restored = false;
};

}  // namespace

std::shared_ptr<DeviceAllocator> allocator_argument(py::handle allocator, const char* arg, const char* label) {
  if (allocator.is_none()) return nullptr;
  check_protocol(allocator, arg);
  return std::make_shared<PyAllocator>(allocator, label ? label : arg);
}

void bind_allocators(py::module_& m) {
  m.def(
      "set_allocator",
      [](py::handle allocator) {
        return object_of(set_global_allocator(allocator_argument(allocator, "set_allocator(allocator)",
                                                                "allocator (the one set_allocator() set)")));
      },
      py::arg("allocator"),
      R"(Makes `allocator` the process-wide allocator of jitbridge's own Tensors; returns the previous one.

allocator: None (jitbridge's stream-ordered pool, cuMemAllocAsync) or an object with
allocate(size, stream) and deallocate(ptr, size, stream) (cuda.core's MemoryResource shape;
jitbridge.allocators has adapters for CuPy, RMM and torch). Every thread without a
using_allocator() scope uses it, and so do the C interface's alloc_async / free_async. See
jitbridge.allocators for the protocol. TypeError when the object lacks those methods.)");
  m.def(
      "get_allocator", [] { return object_of(current_allocator()); },
      R"(The allocator jitbridge's Tensors come from on this thread now: the innermost using_allocator()
scope's, else the one set_allocator() made process-wide; None for jitbridge's own pool.)");
  m.def(
      "_context_device", [] { return current_device(); },
      "The device whose context is current on this thread (0 when none): inside allocate(), the tensor's device.");
  m.def(
      "_enter_allocator_scope",
      [](py::handle allocator) {
        AllocatorScope scope{true, allocator_argument(allocator, "using_allocator(allocator)",
                                                                     "allocator (using_allocator()'s)")};
        auto token = std::make_unique<ScopeToken>();
        token->previous = set_thread_allocator(std::move(scope));
        return py::capsule(token.release(), "jitbridge.allocator_scope", [](PyObject* c) {
          delete static_cast<ScopeToken*>(PyCapsule_GetPointer(c, "jitbridge.allocator_scope"));
        });
      },
      py::arg("allocator"));
  m.def(
      "_exit_allocator_scope",
      [](const py::capsule& token_obj) {
        if (std::string(token_obj.name() ? token_obj.name() : "") != "jitbridge.allocator_scope")
          throw py::type_error("_exit_allocator_scope: not a token of _enter_allocator_scope");
        auto* token = token_obj.get_pointer<ScopeToken>();
        if (token->thread != std::this_thread::get_id())
          throw std::runtime_error("using_allocator: the scope was entered on another thread; a scope is per thread "
                                   "and must be left on the thread that entered it");
        if (token->restored) throw std::runtime_error("using_allocator: this scope was left already");
        token->restored = true;
        AllocatorScope left = set_thread_allocator(std::move(token->previous));
        token->previous = {};
        // `left` (the scope's allocator) is released here, with the GIL.
      },
      py::arg("token"));
}

}  // namespace jitbridge::python
