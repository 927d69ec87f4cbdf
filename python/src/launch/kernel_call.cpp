// kernel_call.cpp — the launch path from Python: arguments to ArgValues (arrays through the interop
// adapters), the consumer stream, packing against the signature, and the driver launch.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <deque>

#include "interop/arrays.hpp"
#include "interop/stream_owners.hpp"
#include "common/checked_args.hpp"
#include "jitbridge/streams.hpp"
#include "jitbridge/launch.hpp"
#include "launch/kernels.hpp"
#include "launch/launch_profile.hpp"
#include "launch/scalar_args.hpp"

namespace jitbridge::python {
namespace {

// Reused per thread: the views and scalar storage of the arguments of one launch.
struct Scratch {
  std::vector<ArrayView> views;
  std::vector<ArgValue> values;
  std::vector<Py_buffer> buffers;  // held bytes-like arguments, released after packing
  std::vector<char> buffer_held;
  std::size_t held = 0;            // how many buffers are held (usually none)
  ArgBuffer packed;
  void prepare(std::size_t n) {
    if (views.size() < n) {
      views.resize(n);
      buffers.resize(n);
      buffer_held.resize(n);
    }
    values.assign(n, ArgValue{});
  }
  void hold_buffer(std::size_t i) {
    buffer_held[i] = 1;
    ++held;
  }
  // Drops what the arguments lent us: DLPack tensors (their deleters run now) and buffers.
  void release(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      if (views[i].owner) views[i].owner.reset();
    for (std::size_t i = 0; held && i < n; ++i) {
      if (buffer_held[i]) {
        PyBuffer_Release(&buffers[i]);
        buffer_held[i] = 0;
        --held;
      }
    }
  }
};

// Fills s.values[0..n) from the Python arguments, arrays viewed for the consumer stream, which is
// decided first (explicit, else the first array's framework, else legacy) and returned.
CUstream convert_arguments(const KernelObject& k, PyObject* const* args, std::size_t n, PyObject* stream_obj,
                           Scratch& s) {
  const char* kernel = k.name.c_str();
  const CUstream stream = consumer_stream(stream_obj ? py::handle(stream_obj) : py::none(), args, n, "stream");
  const ConsumerSource source = consumer_source();  // what a Tensor handed to `stream` will keep
  launch_profile::mark(launch_profile::stream);
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

// Packs s.values against the kernel; returns the device of the arrays (-1: none).
int pack(const KernelObject& k, std::size_t n, Scratch& s, bool check_args) {
  PackResult where;
  if (k.info && k.info->signature) {
    const Signature& sig = *k.info->signature;
    if (sig.params.size() != n) throw py::type_error(arity_message(k.name, sig, n));
    s.packed.reset(sig);
    const std::vector<ParamPlan>& plan = check_args ? k.plan : k.plan_unchecked;
    for (std::size_t i = 0; i < n; ++i) pack_argument(k.name, sig, plan, i, s.values[i], s.packed, where);
  } else {
    const std::vector<std::size_t>& sizes = k.resolved().param_sizes();
    if (sizes.size() != n)
      throw py::type_error(fmt::format("{} takes {} arguments, {} given", k.name, sizes.size(), n));
    s.packed.reset(sizes);
    for (std::size_t i = 0; i < n; ++i) pack_unchecked(i, sizes[i], s.values[i], s.packed, where);
  }
  return where.device;
}

// One Scratch per nesting level of each thread: converting an argument can run Python code (a
// producer's __dlpack__, a property, a finalizer) that launches again on this thread, and that
// launch must not reuse the views the outer one is still filling. The lease prepares its level for
// `n` arguments and releases what they lent (DLPack tensors, buffers) when it ends.
struct ScratchLease {
  struct Pool {
    std::deque<Scratch> levels;  // a deque: growing it keeps the outer levels in place
    std::size_t depth = 0;
  };
  static Pool& pool() {
    thread_local Pool p;
    return p;
  }
  Pool& p = pool();
  Scratch& s = p.depth < p.levels.size() ? p.levels[p.depth] : p.levels.emplace_back();
  const std::size_t n;
  explicit ScratchLease(std::size_t count) : n(count) {
    ++p.depth;
    s.prepare(n);
  }
  ~ScratchLease() {
    s.release(n);
    launch_profile::mark(launch_profile::released);
    --p.depth;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
};

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
  const std::size_t ordinal = static_cast<std::size_t>(device.ordinal());
  if (functions.size() <= ordinal) functions.resize(ordinal + 1);
  if (!functions[ordinal]) {
    try {
      functions[ordinal] = module->loaded(device).function(info ? info->lowered_name : name);
    } catch (const std::invalid_argument& e) {  // an explicit arch that cannot run on this device
      throw py::value_error(fmt::format("{}: {}", name, e.what()));
    }
  }
  function = functions[ordinal];
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
  launch_profile::mark(launch_profile::converted);
  int device = pack(k, n, s, check_args);
  launch_profile::mark(launch_profile::packed);
  if (device < 0) device = current_device();
  const Device& dev = Device::get(device);
  // The module serving this device (built for its architecture on first use); an explicit arch
  // whose code cannot run here is a ValueError with CUDA's rule (targets.hpp), not a bare "no
  // kernel image" from the driver.
  f = &k.resolved(dev);
  validate_launch(*f, config, dev);
  launch_profile::mark(launch_profile::validated);
  return dev;
}

}  // namespace

namespace {

// The full path: every argument viewed through its protocol, packed with pack_argument's checks
// and messages; then the shortcut for these argument types is learnt.
void launch_full_path(const KernelObject& k, LaunchConfig config, PyObject* const* args, std::size_t n,
                      PyObject* stream_obj, bool check_args) {
  ScratchLease lease(n);
  Scratch& s = lease.s;
  const Function* f = nullptr;
  const Device& dev = prepare_launch(k, config, args, n, stream_obj, s, f, check_args);
  launch(*f, config, dev, s.packed);
  launch_profile::mark(launch_profile::launched);
  learn_shortcut(k, args, n, check_args);
}

}  // namespace

void launch_from_python(const KernelObject& k, LaunchConfig config, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* stream_obj, bool check_args) {
  const std::size_t n = static_cast<std::size_t>(nargs);
  if (!k.shortcuts.empty() && launch_by_shortcut(k, config, args, n, stream_obj, check_args)) {
    launch_profile::mark(launch_profile::launched);
    launch_profile::mark(launch_profile::released);
    return;
  }
  launch_full_path(k, config, args, n, stream_obj, check_args);
}

PreparedLaunch prepare_floor(const KernelObject& k, LaunchConfig config, py::tuple args) {
  const std::size_t n = static_cast<std::size_t>(PyTuple_GET_SIZE(args.ptr()));
  ScratchLease lease(n);
  Scratch& s = lease.s;
  const Function* f = nullptr;
  const Device& dev = prepare_launch(k, config, &PyTuple_GET_ITEM(args.ptr(), 0), n, nullptr, s, f, k.check_args);
  dev.make_current();
  PreparedLaunch p;
  p.function = f->function_for(dev);
  p.config = config;
  // The parameter space: each parameter's packed bytes at its offset (the signature's layout, which
  // Function checked against the driver; the driver's own for kernels without one). The pointer
  // form points into it.
  std::vector<std::size_t> sizes;
  if (k.info && k.info->signature) {
    p.offsets = param_offsets(*k.info->signature);
    for (const Param& param : k.info->signature->params) sizes.push_back(param.size);
  } else {
    p.offsets = f->param_offsets();
    sizes = f->param_sizes();
  }
  p.space.resize(n ? p.offsets.back() + sizes.back() : 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::memcpy(p.space.data() + p.offsets[i], s.packed.pointers()[i], sizes[i]);
    p.params.push_back(p.space.data() + p.offsets[i]);
  }
  p.keepalive = args;
  for (std::size_t i = 0; i < n; ++i) {
    PyTypeObject* type = Py_TYPE(PyTuple_GET_ITEM(args.ptr(), i));
    const TypeAdapter& a = adapter_for(type);
    p.types.push_back(type);
    p.exchange.push_back(a.protocol == Protocol::exchange_api && a.api->dltensor_from_py_object_no_sync ? a.api
                                                                                                         : nullptr);
  }
  return p;
}

void PreparedLaunch::launch_exchanging(PyObject* const* args, std::size_t n) const {
  constexpr std::size_t kMax = 32, kMaxBytes = 1024;
  if (n != params.size() || n > kMax) throw py::type_error("_Prepared: call with no arguments or the prepared ones");
  void* addresses[kMax];
  void* local[kMax];
  alignas(16) unsigned char bytes[kMaxBytes];
  const bool buffer = !space.empty() && space.size() <= kMaxBytes;  // else as pointers
  if (buffer) std::memcpy(bytes, space.data(), space.size());
  CUstream stream = config.stream;
  bool asked = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (Py_TYPE(args[i]) != types[i]) throw py::type_error("_Prepared: an argument's type differs from the prepared one");
    local[i] = params[i];
    const DLPackExchangeAPI* api = exchange[i];
    if (!api) continue;
    DLTensor t;
    if (api->dltensor_from_py_object_no_sync(args[i], &t) != 0) throw py::error_already_set();
    addresses[i] = static_cast<char*>(t.data) + t.byte_offset;
    local[i] = &addresses[i];
    if (buffer) std::memcpy(bytes + offsets[i], &addresses[i], sizeof(void*));
    if (!asked) {
      void* s = nullptr;
      if (api->current_work_stream(kDLCUDA, t.device.device_id, &s) != 0) throw py::error_already_set();
      stream = normalize_stream(static_cast<CUstream>(s));
      asked = true;
    }
  }
  launch_with(buffer ? nullptr : local, buffer ? bytes : nullptr, stream);
}

void PreparedLaunch::launch(bool buffer_form) const {
  const bool buffer = buffer_form && !space.empty();
  launch_with(buffer ? nullptr : const_cast<void**>(params.data()), buffer ? space.data() : nullptr, config.stream);
}

void PreparedLaunch::launch_with(void** with_params, const void* buffer, CUstream stream) const {
  std::size_t size = space.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<void*>(buffer), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  check(driver().cuLaunchKernel(function, config.grid.x, config.grid.y, config.grid.z, config.block.x, config.block.y,
                                config.block.z, static_cast<unsigned>(config.shared_mem), stream, with_params,
                                buffer ? extra : nullptr),
        "cuLaunchKernel");
}

double raw_launch_batch(const KernelObject& k, LaunchConfig config, py::tuple args, int batch, bool buffer_form) {
  const PreparedLaunch prepared = prepare_floor(k, config, args);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < batch; ++i) prepared.launch(buffer_form);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

py::dict launch_phases(const KernelObject& k, LaunchConfig config, py::tuple args_tuple, int n) {
  PyObject* const* args = &PyTuple_GET_ITEM(args_tuple.ptr(), 0);
  const std::size_t count = static_cast<std::size_t>(PyTuple_GET_SIZE(args_tuple.ptr()));
  ScratchLease lease(0);  // each phase below prepares and releases it itself
  Scratch& s = lease.s;
  using clock = std::chrono::steady_clock;
  auto per_call = [n](clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock::now() - t0).count() / n;
  };
  py::dict out;
  clock::time_point t0;
  // The producer's own share: its exchange-API calls alone (a framework with the C exchange API).
  if (count > 0) {
    const TypeAdapter& a = adapter_for(Py_TYPE(args[0]));
    if (a.protocol == Protocol::exchange_api && a.api->dltensor_from_py_object_no_sync) {
      DLTensor t{};
      t0 = clock::now();
      for (int i = 0; i < n; ++i)
        if (a.api->dltensor_from_py_object_no_sync(args[0], &t) != 0) throw py::error_already_set();
      out["producer: dltensor_from_py_object_no_sync"] = per_call(t0);
      void* stream = nullptr;
      t0 = clock::now();
      for (int i = 0; i < n; ++i)
        if (a.api->current_work_stream(t.device.device_type, t.device.device_id, &stream) != 0)
          throw py::error_already_set();
      out["producer: current_work_stream"] = per_call(t0);
    }
  }
  t0 = clock::now();
  for (int i = 0; i < n; ++i) consumer_stream(py::none(), args, count, "stream");
  out["consumer_stream"] = per_call(t0);
  t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    s.prepare(count);
    convert_arguments(k, args, count, nullptr, s);
    s.release(count);
  }
  out["convert_arguments"] = per_call(t0);
  s.prepare(count);
  convert_arguments(k, args, count, nullptr, s);
  t0 = clock::now();
  for (int i = 0; i < n; ++i) pack(k, count, s, k.check_args);
  out["pack"] = per_call(t0);
  const Function* f = nullptr;
  const Device& dev = prepare_launch(k, config, args, count, nullptr, s, f, k.check_args);
  t0 = clock::now();
  for (int i = 0; i < n; ++i) validate_launch(*f, config, dev);
  out["validate"] = per_call(t0);
  t0 = clock::now();
  for (int i = 0; i < n; ++i) launch(*f, config, dev, s.packed);
  out["launch"] = per_call(t0);
  s.release(count);
  t0 = clock::now();
  for (int i = 0; i < n; ++i) launch_full_path(k, config, args, count, nullptr, k.check_args);
  out["launch, full path"] = per_call(t0);
  t0 = clock::now();
  for (int i = 0; i < n; ++i)
    if (!launch_by_shortcut(k, config, args, count, nullptr, k.check_args)) throw py::value_error("these arguments take no shortcut");
  out["launch, shortcut"] = per_call(t0);
  return out;
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
    std::size_t size = k.info && k.info->signature ? k.info->signature->params[i].size : k.resolved().param_sizes()[i];
    out.append(py::bytes(static_cast<const char*>(s.packed.pointers()[i]), size));
  }
  return out;
}

Dim3 parse_dim3(PyObject* value, const char* what, KernelObject::DimMemo& memo) {
  if (value == memo.obj.ptr()) return memo.value;
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
