// kernel_call.cpp — the launch path from Python: arguments to ArgValues (arrays through the interop
// adapters), the consumer stream, packing against the signature, and the driver launch.
#include <fmt/format.h>

#include <cstring>
#include <deque>

#include "interop/arrays.hpp"
#include "interop/stream_owners.hpp"
#include "common/checked_args.hpp"
#include "jitbridge/streams.hpp"
#include "jitbridge/launch.hpp"
#include "launch/kernels.hpp"
#include "launch/launch_args.hpp"
#include "launch/scalar_args.hpp"

namespace jitbridge::python {

CUstream convert_arguments(const KernelObject& k, PyObject* const* args, std::size_t n, PyObject* stream_obj,
                           Scratch& s) {
  const char* kernel = k.name.c_str();
  const CUstream stream = consumer_stream(stream_obj ? py::handle(stream_obj) : py::none(), args, n, "stream");
  const ConsumerSource source = consumer_source();  // what a Tensor handed to `stream` will keep
  for (std::size_t i = 0; i < n; ++i) {
    // An earlier argument's conversion may have run a nested launch (Python code): this call's note comes back.
    renote_consumer_source(source);
    bool is_array = false;
    PyTypeObject* type = Py_TYPE(args[i]);
    if (type != &PyLong_Type && type != &PyFloat_Type && type != &PyBool_Type && args[i] != Py_None) {
      const TypeAdapter& a = adapter_for(type);
      if (a.protocol != Protocol::none || a.instance_probe)
        is_array = view_array(args[i], a, stream, s.views[i], k.argument_name(i));
    }
    if (is_array) {
      s.values[i].kind = ArgValue::Kind::array;
      s.values[i].array = &s.views[i];
    } else {
      if (scalar_value(args[i], i, s.values[i], s.buffers[i], kernel)) s.hold_buffer(i);
    }
  }
  return stream;
}

namespace {

// Packs s.values against the kernel (pack_values, the one packing loop); returns the device of the arrays (-1: none).
int pack(const KernelObject& k, std::size_t n, Scratch& s, bool check_args) {
  return k.launch->pack(s.values.data(), sizeof(ArgValue), n, s.packed, check_args);
}

}  // namespace

const Module& ModuleObject::loaded(const Device& device) const { return modules->module_for(device); }

const Module& ModuleObject::loaded() const { return loaded(Device::get(current_device())); }

const char* KernelObject::argument_name(std::size_t i) const {
  while (argument_names.size() <= i)
    argument_names.push_back(fmt::format("{}: argument {}", name, argument_names.size()));
  return argument_names[i].c_str();
}

const Function& KernelObject::resolved(const Device& device) const {
  if (checked_device == &device) return *function;
  try {
    function = launch->resolved(device).function.get();
  } catch (const std::invalid_argument& e) {  // an explicit arch that cannot run on this device ("name: why")
    throw py::value_error(e.what());
  }
  checked_device = &device;
  return *function;
}

const Function& KernelObject::resolved() const { return resolved(Device::get(current_device())); }

namespace {

// Everything a launch does before the driver call: arguments converted and checked against the
// signature (into the thread's Scratch, which `release` empties afterwards), the consumer stream
// into config.stream, the device and the module serving it, the configuration validated.
// Returns the device; `f` receives the kernel.
const Device& prepare_launch(const KernelObject& k, LaunchConfig& config, PyObject* const* args, std::size_t n,
                             PyObject* stream_obj, Scratch& s, const Function*& f, bool check_args) {
  config.stream = convert_arguments(k, args, n, stream_obj, s);
  int device = pack(k, n, s, check_args);
  if (device < 0) device = current_device();
  const Device& dev = Device::get(device);
  // The module serving this device (built for its architecture on first use); an explicit arch
  // whose code cannot run here is a ValueError with CUDA's rule (targets.hpp), not a bare "no
  // kernel image" from the driver.
  f = &k.resolved(dev);
  validate_launch(*f, config, dev);
  return dev;
}

}  // namespace

// The full path: every argument viewed through its protocol, packed with pack_argument's checks
// and messages; then the shortcut for these argument types is learnt.
void launch_full_path(const KernelObject& k, LaunchConfig& config, PyObject* const* args, std::size_t n,
                      PyObject* stream_obj, bool check_args) {
  ScratchLease lease(n);
  Scratch& s = lease.s;
  const Function* f = nullptr;
  const Device& dev = prepare_launch(k, config, args, n, stream_obj, s, f, check_args);
  launch(*f, config, dev, s.packed);
  learn_shortcut(k, args, n, check_args);
}

py::list pack_from_python(const KernelObject& k, PyObject* const* args, Py_ssize_t nargs) {
  const std::size_t n = static_cast<std::size_t>(nargs);
  ScratchLease lease(n);
  Scratch& s = lease.s;
  PyObject* none = Py_None;
  convert_arguments(k, args, n, none, s);
  pack(k, n, s, k.check_args);
  py::list out;
  for (std::size_t i = 0; i < n; ++i) {
    const Signature* sig = k.launch->signature();
    std::size_t size = sig ? sig->params[i].size : k.resolved().param_sizes()[i];
    out.append(py::bytes(static_cast<const char*>(s.packed.pointers()[i]), size));
  }
  return out;
}

Dim3 parse_dim3_remembered(PyObject* value, const char* what, KernelObject::DimMemo& memo) {
  const Dim3 d = parse_dim3(py::handle(value), what);
  bool immutable = PyLong_CheckExact(value);
  if (PyTuple_CheckExact(value)) {
    immutable = true;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) immutable = immutable && PyLong_CheckExact(PyTuple_GET_ITEM(value, i));
  }
  if (immutable) memo = {py::reinterpret_borrow<py::object>(value), d};
  return d;
}

Dim3 parse_dim3(py::handle value, const char* what) {
  // Fast path: small exact ints, alone or in a tuple (the common launch spellings).
  auto small = [](PyObject* o, unsigned& out) {
    if (!PyLong_CheckExact(o)) return false;
    long v = PyLong_AsLong(o);
    if (v < 1 || v > 0x7fffffffL) {
      PyErr_Clear();
      return false;
    }
    out = static_cast<unsigned>(v);
    return true;
  };
  {
    Dim3 fast;
    PyObject* o = value.ptr();
    if (small(o, fast.x)) return fast;
    if (PyTuple_CheckExact(o)) {
      const Py_ssize_t n = PyTuple_GET_SIZE(o);
      if (n >= 1 && n <= 3 && small(PyTuple_GET_ITEM(o, 0), fast.x) &&
          (n < 2 || small(PyTuple_GET_ITEM(o, 1), fast.y)) && (n < 3 || small(PyTuple_GET_ITEM(o, 2), fast.z)))
        return fast;
    }
  }
  Dim3 d;
  // Each item read once, through int_arg; a list is copied into a tuple first, so an item's
  // __index__ that changes the list cannot change what the later items are.
  auto one = [what](PyObject* item, const char* axis) -> unsigned {
    return static_cast<unsigned>(int_arg(item, Subject(what, ": ", axis), 1, 0xffffffffll, [&](const std::string& v) {
      return fmt::format("{}: {} = {} is out of range (1 to 2**32-1)", what, axis, v);
    }));
  };
  if (PyTuple_Check(value.ptr()) || PyList_Check(value.ptr())) {
    const py::tuple items = PyTuple_Check(value.ptr()) ? py::reinterpret_borrow<py::tuple>(value)
                                                       : py::reinterpret_steal<py::tuple>(PyList_AsTuple(value.ptr()));
    if (!items) throw py::error_already_set();
    const Py_ssize_t n = PyTuple_GET_SIZE(items.ptr());
    if (n < 1 || n > 3) throw py::value_error(fmt::format("{}: expected 1 to 3 dimensions, got {}", what, n));
    static const char* const axes[] = {"x", "y", "z"};
    unsigned* out[] = {&d.x, &d.y, &d.z};
    for (Py_ssize_t i = 0; i < n; ++i) *out[i] = one(PyTuple_GET_ITEM(items.ptr(), i), axes[i]);
    return d;
  }
  if (!PyIndex_Check(value.ptr()) || PyBool_Check(value.ptr()))
    throw py::type_error(fmt::format("{}: expected an int or a tuple of up to 3 ints, got {}", what, type_name(value)));
  d.x = one(value.ptr(), "x");
  return d;
}

}  // namespace jitbridge::python
