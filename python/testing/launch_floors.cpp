// launch_floors.cpp — jitbridge_testing's launch benchmarks (bench/bench_launch.py): the raw cuLaunchKernel floors
// (a C++ loop; `prepared`, a callable with Python in the loop) and the launch path's phases each in a C++ loop. Only
// this test-only module has this code: _core lends the kernel's bytes (_internals.kernel_pack, with every check) and
// its CUfunction (_internals.kernel_function); the rest runs in this module's own copy of the bindings.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "common/vectorcall.hpp"
#include "common/initialised.hpp"
#include "interop/arrays.hpp"
#include "interop/array_support.hpp"
#include "jitbridge/driver.hpp"
#include "jitbridge/streams.hpp"
#include "launch/kernels.hpp"
#include "launch/launch_args.hpp"
#include "testing.hpp"

namespace jitbridge::python {
namespace {

// One kernel launch with its arguments converted, checked and packed once; each call is one cuLaunchKernel with the
// packed bytes and nothing else (no checks, no stream rule). `keepalive` holds the arrays whose addresses were packed.
struct Floor {
  CUfunction function = nullptr;
  LaunchConfig config;
  std::vector<unsigned char> space;  // the kernel's parameter space (the buffer form); empty: no parameters
  std::vector<std::size_t> offsets;  // each parameter's offset in `space`
  std::vector<void*> params;         // into space, at offsets: the array-of-pointers form
  py::object keepalive;
  std::vector<PyTypeObject*> types;                // each prepared argument's type (keepalive holds them)
  std::vector<const DLPackExchangeAPI*> exchange;  // per argument: its type's exchange API, or nullptr

  // As one buffer (`buffer_form`) or as pointers. Throws DriverError.
  void launch(bool buffer_form = true) const {
    const bool buffer = buffer_form && !space.empty();
    launch_with(buffer ? nullptr : const_cast<void**>(params.data()), buffer ? space.data() : nullptr, config.stream);
  }

  // Reads the address of each argument whose type has the DLPack exchange API (no checks) and the framework's
  // current stream on the first one's device, then launches with the other arguments as prepared. `args` must have
  // the prepared types (TypeError otherwise). Throws DriverError.
  void launch_exchanging(PyObject* const* args, std::size_t n) const {
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

  void launch_with(void** with_params, const void* buffer, CUstream stream) const {
    std::size_t size = space.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<void*>(buffer), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    check(driver().cuLaunchKernel(function, config.grid.x, config.grid.y, config.grid.z, config.block.x,
                                  config.block.y, config.block.z, static_cast<unsigned>(config.shared_mem), stream,
                                  with_params, buffer ? extra : nullptr),
          "cuLaunchKernel");
  }
};

// Names the arguments in the errors of this module's own conversions.
const KernelObject& floor_names() {
  static const KernelObject* names = [] {
    auto* k = new KernelObject();  // never freed: lives as long as the module
    k->name = "floor";
    return k;
  }();
  return *names;
}

LaunchConfig config_of(py::handle grid, py::handle block) {
  LaunchConfig c;
  c.grid = parse_dim3(grid, "grid");
  c.block = parse_dim3(block, "block");
  return c;
}

py::tuple args_of(py::handle args, const char* what) {
  if (!PyTuple_Check(args.ptr())) throw py::type_error(fmt::format("{}: args must be a tuple", what));
  return py::reinterpret_borrow<py::tuple>(args);
}

// The floor of `kernel` (a RawKernel) for `args`: the consumer stream and the arrays' device as a launch decides
// them, the bytes _core packs (_internals.kernel_pack: every check), at the offsets the driver gives.
Floor prepare(py::handle kernel, LaunchConfig config, py::tuple args) {
  const std::size_t n = static_cast<std::size_t>(PyTuple_GET_SIZE(args.ptr()));
  int device = -1;
  {
    ScratchLease lease(n);
    config.stream = convert_arguments(floor_names(), &PyTuple_GET_ITEM(args.ptr(), 0), n, nullptr, lease.s);
    for (std::size_t i = 0; i < n && device < 0; ++i)
      if (lease.s.values[i].kind == ArgValue::Kind::array) device = lease.s.views[i].device.device_id;
  }
  if (device < 0) device = current_device();
  Floor f;
  CUkernel handle = nullptr;
  if (core_internals().kernel_function(kernel.ptr(), device, &f.function, &handle) != 0) throw py::error_already_set();
  const py::list packed = pack_args(kernel, args);
  // The layout: the signature's (which _core checked against the driver's), else the driver's own.
  std::vector<std::size_t> sizes;
  const py::object signature = kernel.attr("signature");
  if (!signature.is_none()) {
    Signature sig;
    for (py::handle p : signature.attr("params")) {
      Param param;
      param.size = p.attr("size").cast<std::size_t>();
      param.align = p.attr("align").cast<std::size_t>();
      param.spelling = p.attr("spelling").cast<std::string>();
      sizes.push_back(param.size);
      sig.params.push_back(std::move(param));
    }
    f.offsets = param_offsets(sig);
  } else {
    if (!driver().cuKernelGetParamInfo) throw std::runtime_error("prepared: the driver has no cuKernelGetParamInfo");
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t offset = 0, size = 0;
      check(driver().cuKernelGetParamInfo(handle, i, &offset, &size), "cuKernelGetParamInfo");
      f.offsets.push_back(offset);
      sizes.push_back(size);
    }
  }
  if (sizes.size() != n) throw py::type_error("prepared: the argument count differs from the kernel's");
  f.config = config;
  f.space.resize(n ? f.offsets.back() + sizes.back() : 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string bytes = py::bytes(packed[i]);
    if (bytes.size() != sizes[i]) throw std::logic_error("prepared: _pack's bytes differ from the driver's size");
    std::memcpy(f.space.data() + f.offsets[i], bytes.data(), sizes[i]);
    f.params.push_back(f.space.data() + f.offsets[i]);
  }
  f.keepalive = args;
  for (std::size_t i = 0; i < n; ++i) {
    PyTypeObject* type = Py_TYPE(PyTuple_GET_ITEM(args.ptr(), i));
    const TypeAdapter& a = adapter_for(type);
    f.types.push_back(type);
    f.exchange.push_back(a.protocol == Protocol::exchange_api && a.api->dltensor_from_py_object_no_sync ? a.api
                                                                                                         : nullptr);
  }
  return f;
}

// _Prepared(): floor.launch(); _Prepared(*args) with arguments of the prepared types: launch_exchanging.
PyObject* floor_vectorcall(PyObject* self, PyObject* const* args, std::size_t nargsf, PyObject* kwnames) {
  try {
    if (kwnames && PyTuple_GET_SIZE(kwnames)) throw py::type_error("_Prepared takes no keyword arguments");
    const Floor& f = value_of<Floor>(self);
    const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n == 0) f.launch();
    else f.launch_exchanging(args, static_cast<std::size_t>(n));
    Py_RETURN_NONE;
  } catch (...) {
    return translate_current_exception();
  }
}

PyObject* floor_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  vectorcall_slot(self) = floor_vectorcall;
  if (kwargs && PyDict_GET_SIZE(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "_Prepared takes no keyword arguments");
    return nullptr;
  }
  return floor_vectorcall(self, &PyTuple_GET_ITEM(args, 0), static_cast<std::size_t>(PyTuple_GET_SIZE(args)), nullptr);
}

// Microseconds per call of each phase alone, each in a C++ loop of n: the producer's exchange-API calls (when the
// first argument has that API), consumer_stream, convert_arguments (this module's copy of the code _core runs), the
// raw floor, and the whole launch through kernel[grid, block](*args) called from C++ (the shortcut, once learnt).
py::dict launch_phases(py::handle kernel, py::handle grid, py::handle block, py::tuple args_tuple, int n) {
  const Floor floor = prepare(kernel, config_of(grid, block), args_tuple);
  PyObject* const* args = &PyTuple_GET_ITEM(args_tuple.ptr(), 0);
  const std::size_t count = static_cast<std::size_t>(PyTuple_GET_SIZE(args_tuple.ptr()));
  using clock = std::chrono::steady_clock;
  auto per_call = [n](clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock::now() - t0).count() / n;
  };
  py::dict out;
  clock::time_point t0;
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
    ScratchLease lease(count);
    convert_arguments(floor_names(), args, count, nullptr, lease.s);
  }
  out["convert_arguments"] = per_call(t0);
  t0 = clock::now();
  for (int i = 0; i < n; ++i) floor.launch();
  out["raw cuLaunchKernel (one buffer)"] = per_call(t0);
  const py::object configured = kernel.attr("__getitem__")(py::make_tuple(grid, block));
  for (int i = 0; i < 2; ++i) {  // the first call takes the full path and learns the shortcut
    PyObject* r = PyObject_Vectorcall(configured.ptr(), args, count, nullptr);
    if (!r) throw py::error_already_set();
    Py_DECREF(r);
  }
  t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    PyObject* r = PyObject_Vectorcall(configured.ptr(), args, count, nullptr);
    if (!r) throw py::error_already_set();
    Py_DECREF(r);
  }
  out["launch, kernel[grid, block](*args) from C++"] = per_call(t0);
  return out;
}

}  // namespace

void bind_launch_floors(py::module_& m) {
  py::class_<Floor>(m, "_Prepared", py::custom_type_setup([](PyHeapTypeObject* heap) {
                      set_up_vectorcall(heap, floor_call);
                    }),
                    "A benchmark floor (prepared()): call with no arguments, or with arguments of the prepared types.");
  m.def("raw_launch_batch",
        [](py::handle kernel, py::handle grid, py::handle block, py::handle args, int batch, bool buffer_form) {
          const Floor f = prepare(kernel, config_of(grid, block), args_of(args, "raw_launch_batch"));
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < batch; ++i) f.launch(buffer_form);
          return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        },
        py::arg("kernel"), py::arg("grid"), py::arg("block"), py::arg("args"), py::arg("batch"),
        py::arg("buffer_form") = false,
        "Benchmark floor: microseconds for `batch` raw cuLaunchKernel calls of a RawKernel with these arguments "
        "(converted and checked once), in a C++ loop; parameters as pointers, or as one buffer.");
  m.def("prepared",
        [](py::handle kernel, py::handle grid, py::handle block, py::handle args) {
          return prepare(kernel, config_of(grid, block), args_of(args, "prepared"));
        },
        py::arg("kernel"), py::arg("grid"), py::arg("block"), py::arg("args"),
        "Benchmark floor: a callable doing one raw cuLaunchKernel (parameters as one buffer) with these arguments, "
        "converted, checked and packed once; called with arrays of the prepared types, it reads their addresses "
        "and the framework's stream through the DLPack exchange API first (no checks per call).");
  m.def("launch_phases",
        [](py::handle kernel, py::handle grid, py::handle block, py::handle args, int n) {
          return launch_phases(kernel, grid, block, args_of(args, "launch_phases"), n);
        },
        py::arg("kernel"), py::arg("grid"), py::arg("block"), py::arg("args"), py::arg("n"),
        "Benchmark: microseconds per call of each phase of the Python launch path alone, in C++ loops of n "
        "(launches 2n + 2 times).");
  m.def("bench_view",
        [](py::handle obj, long n, py::handle stream) {
          PyObject* o = obj.ptr();
          const CUstream s = consumer_stream(stream, &o, 1, "stream");
          ArrayView view;
          if (!view_array(o, s, view, "obj")) throw py::type_error("bench_view: obj is not an array");
          const auto t0 = std::chrono::steady_clock::now();
          for (long i = 0; i < n; ++i) {
            forget_first_tensor();  // a launch's first array reuses consumer_stream()'s look; the others do not
            view_array(o, s, view, "obj");
          }
          const auto t1 = std::chrono::steady_clock::now();
          return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n > 0 ? n : 1);
        },
        py::arg("obj"), py::arg("n") = 100000, py::arg("stream") = py::none(),
        "Benchmark: nanoseconds per view_array() of obj (this module's copy of jitbridge._core's reader), in a C++ "
        "loop (consumer stream resolved once).");
}

}  // namespace jitbridge::python
