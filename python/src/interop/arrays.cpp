// arrays.cpp — Python arrays to ArrayViews: the per-type adapter cache, the protocols (exchange API,
// __dlpack__, CAI, the CuPy/Numba readers) and the consumer-stream rule.
#include <fmt/format.h>

#include <cstring>
#include <unordered_map>

#include "interop/array_support.hpp"
#include "bindings.hpp"
#include "interop/interop_objects.hpp"
#include "interop/stream_owners.hpp"
#include "jitbridge/device.hpp"

namespace jitbridge::python {
namespace {

bool type_has(PyTypeObject* type, PyObject* name) {
  PyObject* v = PyObject_GetAttr(reinterpret_cast<PyObject*>(type), name);
  if (!v) {
    PyErr_Clear();
    return false;
  }
  Py_DECREF(v);
  return true;
}

// The type's DLPack exchange table of major version 1 (walking prev_api), or nullptr.
const DLPackExchangeAPI* exchange_api_of(PyTypeObject* type) {
  for (PyObject* name : {interned_names().exchange, interned_names().exchange_old}) {
    PyObject* capsule = PyObject_GetAttr(reinterpret_cast<PyObject*>(type), name);
    if (!capsule) {
      PyErr_Clear();
      continue;
    }
    const DLPackExchangeAPIHeader* header = nullptr;
    if (PyCapsule_IsValid(capsule, "dlpack_exchange_api"))
      header = static_cast<const DLPackExchangeAPIHeader*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
    Py_DECREF(capsule);  // the table itself lives for the whole process (DLPack requires it)
    for (int hops = 0; header && header->version.major != DLPACK_MAJOR_VERSION && hops < 16; ++hops)
      header = header->prev_api;
    if (!header || header->version.major != DLPACK_MAJOR_VERSION) continue;
    const auto* api = reinterpret_cast<const DLPackExchangeAPI*>(header);
    if (api->managed_tensor_from_py_object_no_sync && api->current_work_stream) return api;
  }
  return nullptr;
}

// The type's __module__ ("" when it has none, or none as str).
std::string module_of(PyTypeObject* type) {
  PyObject* module = PyObject_GetAttr(reinterpret_cast<PyObject*>(type), interned_names().module);
  if (!module) {
    PyErr_Clear();
    return {};
  }
  std::string out;
  if (PyUnicode_Check(module)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(module, &n);
    if (!s) PyErr_Clear();
    else out.assign(s, static_cast<std::size_t>(n));
  }
  Py_DECREF(module);
  return out;
}

bool is_cupy_type(PyTypeObject* type) {
  return module_of(type).rfind("cupy", 0) == 0;  // cupy, cupy._core.core, cupyx...
}

// jax, jax.*, jaxlib, jaxlib.* (jax.Array's implementation lives in jaxlib).
bool is_jax_type(PyTypeObject* type) {
  const std::string m = module_of(type);
  return m == "jax" || m.rfind("jax.", 0) == 0 || m == "jaxlib" || m.rfind("jaxlib.", 0) == 0;
}

TypeAdapter make_adapter(PyTypeObject* type) {
  TypeAdapter a;
  if (is_jitbridge_type(type)) {
    a.protocol = Protocol::jitbridge;
    return a;
  }
  a.cupy = is_cupy_type(type);
  if (is_jax_type(type)) a.immutable_producer = "JAX";
  if ((a.api = exchange_api_of(type))) a.protocol = Protocol::exchange_api;
  // Exactly cupy.ndarray / numba's DeviceNDArray: their CAI fields, read from attributes (each
  // builds its CAI dict in Python, ~0.9 us an array); subclasses keep the protocols below.
  else if (is_cupy_ndarray(type) && type_has(type, interned_names().cai)) a.protocol = Protocol::cupy_fields;
  else if (is_numba_device_array(type) && type_has(type, interned_names().cai)) a.protocol = Protocol::numba_fields;
  // CuPy arrays go through __cuda_array_interface__ although they also speak __dlpack__: CuPy
  // 14.2's DLPack export gets negative strides wrong (it divides the byte stride by the item size
  // as an unsigned number: -4 bytes of float16 arrive as 2**63 - 2 elements), while its CAI
  // carries them right, in bytes. CAI is also the cheaper of the two per call.
  else if (a.cupy && type_has(type, interned_names().cai)) a.protocol = Protocol::cuda_array_interface;
  else if (type_has(type, interned_names().dlpack)) a.protocol = Protocol::dlpack;
  else if (type_has(type, interned_names().cai)) a.protocol = Protocol::cuda_array_interface;
  else a.instance_probe = type->tp_dictoffset != 0;
  return a;
}

struct AdapterCache {
  std::unordered_map<PyTypeObject*, TypeAdapter> adapters;  // node-based: references stay valid
  // The types seen last, scanned before the map: a launch's arguments alternate between a few
  // types (tensors, ints, floats), which a one-entry cache would keep missing.
  static constexpr int kRecent = 8;
  PyTypeObject* recent_type[kRecent] = {};
  const TypeAdapter* recent[kRecent] = {};
  int next = 0;
};

AdapterCache& adapter_cache() {
  static AdapterCache* cache = new AdapterCache();  // never destroyed (holds type references)
  return *cache;
}

// ---- the protocols ---------------------------------------------------------------------------

// Counts consumer_stream() calls: memos below are valid within one call only.
thread_local std::uint64_t stream_generation = 1;

// The DLTensor of the object framework_stream() looked at last, kept for view_exchange() within the
// same consumer_stream() call, so the first array of a launch is asked once, not twice. Its shape
// and strides are valid only until Python code runs (a property could resize the tensor), so it is
// kept only for objs[0], which every caller views right after consumer_stream(), and used once.
struct FirstTensorMemo {
  std::uint64_t generation = 0;
  PyObject* obj = nullptr;
  DLTensor tensor{};
};
thread_local FirstTensorMemo first_tensor_memo;

// A producer's C function returned `rc`: non-zero, or an error left set, raises it (named).
void check_producer(int rc, const char* arg) {
  if (rc != 0 || PyErr_Occurred()) raise_producer_error(arg);
}

DLDevice exchange_device(PyObject* obj, const DLPackExchangeAPI& api, const char* arg) {
  if (api.dltensor_from_py_object_no_sync) {
    DLTensor t{};
    check_producer(api.dltensor_from_py_object_no_sync(obj, &t), arg);
    first_tensor_memo = {stream_generation, obj, t};
    return t.device;
  }
  DLManagedTensorVersioned* m = nullptr;
  check_producer(api.managed_tensor_from_py_object_no_sync(obj, &m), arg);
  if (!m) fail(PyExc_BufferError, fmt::format("{}: the producer returned a NULL DLPack tensor", arg));
  DLDevice d = m->dl_tensor.device;
  if (m->deleter) m->deleter(m);
  return d;
}

// The framework's current stream is asked once per (table, device) within one call of
// consumer_stream() (a launch, an as_array): the 2nd..Nth tensor of a launch reuse it. Nothing
// can change the framework's current stream between those, since the GIL is held throughout.
struct StreamMemo {
  std::uint64_t generation = 0;
  const DLPackExchangeAPI* api = nullptr;
  int device = -1;
  CUstream stream = nullptr;
};
thread_local StreamMemo stream_memo;

CUstream exchange_stream(const DLPackExchangeAPI& api, int device_id, const char* arg) {
  StreamMemo& m = stream_memo;
  if (m.generation == stream_generation && m.api == &api && m.device == device_id) return m.stream;
  void* s = nullptr;
  check_producer(api.current_work_stream(kDLCUDA, device_id, &s), arg);
  m = {stream_generation, &api, device_id, normalize_stream(static_cast<CUstream>(s))};
  return m.stream;
}

void view_exchange(PyObject* obj, const DLPackExchangeAPI& api, CUstream consumer, ArrayView& view, const char* arg) {
  if (api.dltensor_from_py_object_no_sync) {
    FirstTensorMemo& memo = first_tensor_memo;
    if (memo.generation == stream_generation && memo.obj == obj) {
      memo.obj = nullptr;  // used once
      fill_from_dltensor(memo.tensor, false, view, arg);
    } else {
      DLTensor t{};
      check_producer(api.dltensor_from_py_object_no_sync(obj, &t), arg);
      fill_from_dltensor(t, false, view, arg);
    }
  } else {
    DLManagedTensorVersioned* m = nullptr;
    check_producer(api.managed_tensor_from_py_object_no_sync(obj, &m), arg);
    view = view_from_managed(m, arg);  // owns m: its deleter runs exactly once, also when refused
  }
  if (is_cuda(view.device)) {
    CUstream producer = exchange_stream(api, view.device.device_id, arg);
    if (producer != consumer) stream_wait(view.device.device_id, consumer, producer);
  }
}

// Takes the tensor out of a DLPack capsule (renaming it used_… at once), or refuses the capsule.
void take_capsule(PyObject* capsule, ArrayView& view, const char* arg) {
  if (!PyCapsule_CheckExact(capsule))
    fail(PyExc_TypeError, fmt::format("{}: __dlpack__() returned a {}, not a PyCapsule", arg, Py_TYPE(capsule)->tp_name));
  const char* name = PyCapsule_GetName(capsule);
  if (!name) PyErr_Clear();
  const std::string_view n = name ? name : "";
  if (n == "dltensor_versioned") {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, name));
    if (!m) throw py::error_already_set();
    if (PyCapsule_SetName(capsule, "used_dltensor_versioned") != 0) throw py::error_already_set();
    view = view_from_managed(m, arg);  // owns m from here: the deleter runs exactly once
  } else if (n == "dltensor") {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, name));
    if (!m) throw py::error_already_set();
    if (PyCapsule_SetName(capsule, "used_dltensor") != 0) throw py::error_already_set();
    view = view_from_managed(m, arg);
  } else if (n.substr(0, 5) == "used_") {
    fail(PyExc_BufferError,
         fmt::format("{}: the DLPack capsule was already consumed (it is named '{}')", arg, n));
  } else {
    fail(PyExc_TypeError,
         fmt::format("{}: __dlpack__() returned a capsule named '{}', not 'dltensor_versioned' or 'dltensor'", arg,
                     name ? name : "NULL"));
  }
}

void view_dlpack(PyObject* obj, CUstream consumer, ArrayView& view, const char* arg) {
  const InternedNames& k = interned_names();
  // __dlpack_device__ first: a stream goes along only for CUDA memory (CPU producers refuse one).
  bool cuda = false;
  PyObject* device = PyObject_CallMethodNoArgs(obj, k.dlpack_device);
  if (!device) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) raise_producer_error(arg);
    PyErr_Clear();  // an old producer without __dlpack_device__: no stream (it assumes the legacy one)
  } else {
    py::object owned = py::reinterpret_steal<py::object>(device);
    if (!PyTuple_Check(device) || PyTuple_GET_SIZE(device) != 2)
      fail(PyExc_TypeError, fmt::format("{}: __dlpack_device__() returned a {}, not a (device_type, device_id) tuple",
                                        arg, Py_TYPE(device)->tp_name));
    const py::object type_obj = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(device, 0));
    const std::int64_t type = int_item(type_obj.ptr(), arg, "__dlpack_device__() device type");
    cuda = type == kDLCUDA || type == kDLCUDAManaged;
  }
  py::object stream = cuda ? py::object(py::int_(stream_to_int(consumer))) : py::object(py::none());
  PyObject* call[4] = {nullptr, obj, stream.ptr(), k.max_version};
  PyObject* capsule =
      PyObject_VectorcallMethod(k.dlpack, call + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, k.kw_stream_max);
  if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();  // a producer from before DLPack 1.0: no max_version, legacy capsule
    call[0] = nullptr;
    call[1] = obj;
    capsule = PyObject_VectorcallMethod(k.dlpack, call + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, k.kw_stream);
  }
  if (!capsule) raise_producer_error(arg);
  py::object owned = py::reinterpret_steal<py::object>(capsule);
  take_capsule(capsule, view, arg);
}

void view_cai(PyObject* obj, CUstream consumer, ArrayView& view, const char* arg) {
  PyObject* iface = PyObject_GetAttr(obj, interned_names().cai);
  if (!iface) raise_producer_error(arg);
  py::object owned = py::reinterpret_steal<py::object>(iface);
  view_cai_dict(iface, consumer, view, arg);
}

bool same_view(const ArrayView& a, const ArrayView& b) {
  auto same_dims = [](const Dims& x, const Dims& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i] != y[i]) return false;
    return true;
  };
  return a.ptr() == b.ptr() && a.device.device_type == b.device.device_type &&
         a.device.device_id == b.device.device_id && a.dtype == b.dtype && a.readonly == b.readonly &&
         same_dims(a.shape, b.shape) &&
         (a.size() == 0 || same_dims(a.strides, b.strides));
}

// The attribute reader, checked against the type's own CAI on its first array: a difference (or
// an attribute the reader cannot read) demotes the type to the CAI path for good.
void view_fields_checked(PyObject* obj, const TypeAdapter& a, CUstream consumer, ArrayView& view, const char* arg) {
  if (a.verified) {
    view_framework_fields(obj, a.protocol, consumer, view, arg);
    return;
  }
  ArrayView reference;
  view_cai(obj, consumer, reference, arg);  // errors here are the array's own: they propagate
  bool agrees = false;
  try {
    view_framework_fields(obj, a.protocol, consumer, view, arg);
    agrees = same_view(view, reference);
  } catch (const std::exception&) {  // py::error_already_set, InteropError, py::value_error, ...
    PyErr_Clear();
  }
  a.verified = true;
  if (!agrees) {
    a.protocol = Protocol::cuda_array_interface;
    view = reference;
  }
}

bool view_own(PyObject* obj, CUstream consumer, ArrayView& view, const char* arg) {
  if (TensorObject* t = tensor_object(obj)) {
    view = t->tensor.view();
    // The hand-off stores the consumer stream: its owner is found only then, never on the
    // same-stream path.
    const std::shared_ptr<DeviceBuffer>& buffer = t->tensor.buffer();
    if (!buffer->needs_no_hand_off(consumer)) buffer->hand_to(consumer_stream_ref(consumer, t->tensor.device()));
    return true;
  }
  if (ArrayViewObject* v = array_view_object(obj)) {
    view = v->view;
    if (is_cuda(view.device) && view.size() != 0 && v->stream.handle != consumer)
      stream_wait(view.device.device_id, consumer, v->stream.handle);  // the consumer is not stored
    return true;
  }
  fail(PyExc_TypeError, fmt::format("{}: the {} object is not initialised", arg, Py_TYPE(obj)->tp_name));
}

// obj.<name> as a new reference; null when it has no such attribute. Other errors its lookup
// raised (a property, a __getattr__) are the producer's: raised, named.
py::object optional_attr(PyObject* obj, PyObject* name, const char* arg) {
  PyObject* v = PyObject_GetAttr(obj, name);
  if (!v) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) raise_producer_error(arg);
    PyErr_Clear();
  }
  return py::reinterpret_steal<py::object>(v);
}

// Objects of a type without a protocol may still carry one in their instance __dict__.
bool view_instance(PyObject* obj, CUstream consumer, ArrayView& view, const char* arg) {
  if (py::object iface = optional_attr(obj, interned_names().cai, arg)) {
    view_cai_dict(iface.ptr(), consumer, view, arg);
    return true;
  }
  if (optional_attr(obj, interned_names().dlpack, arg)) {
    view_dlpack(obj, consumer, view, arg);
    return true;
  }
  return false;
}

std::uintptr_t stream_handle(PyObject* v, const char* arg, const char* what) {
  if (!PyLong_Check(v) || PyBool_Check(v))
    throw py::type_error(fmt::format("{}: {} is a {}, not an int", arg, what, Py_TYPE(v)->tp_name));
  std::uint64_t h = 0;
  const IntRead status = read_uint64(v, h);
  if (status == IntRead::negative) throw py::value_error(fmt::format("{}: a stream handle cannot be negative", arg));
  if (status != IntRead::ok) raise_int_error(status, v, Subject(arg, ": ", what));
  return static_cast<std::uintptr_t>(h);
}

}  // namespace

// ---- shared with framework_arrays.cpp (array_support.hpp) ----------------------------------------

const InternedNames& interned_names() {
  static const InternedNames* n = new InternedNames();
  return *n;
}

[[noreturn]] void fail(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

[[noreturn]] void raise_producer_error(const char* arg) {
  if (!PyErr_Occurred())
    fail(PyExc_BufferError, fmt::format("{}: the producer failed without setting an exception", arg));
  py::error_already_set e;
  for (PyObject* known : {PyExc_TypeError, PyExc_ValueError, PyExc_OverflowError, PyExc_BufferError,
                          PyExc_RuntimeError, PyExc_AttributeError, PyExc_IndexError, PyExc_NotImplementedError}) {
    if (e.type().ptr() == known) {
      const std::string message = fmt::format("{}: {}", arg, exception_text(e.value().ptr()));
      py::raise_from(e, known, message.c_str());
      throw py::error_already_set();
    }
  }
#if PY_VERSION_HEX >= 0x030B0000
  if (e.matches(PyExc_Exception)) {  // the producer's own type stays; a note names the argument
    const std::string note = fmt::format("raised by the producer of {}", arg);
    PyObject* r = PyObject_CallMethod(e.value().ptr(), "add_note", "s", note.c_str());
    if (r) Py_DECREF(r);
    else PyErr_Clear();  // no note: the producer's exception is still the one raised
  }
#endif
  throw e;
}

std::uint64_t call_generation() noexcept { return stream_generation; }

void forget_first_tensor() noexcept { first_tensor_memo.obj = nullptr; }

// ---- the interface (arrays.hpp) ----------------------------------------------------------------

const TypeAdapter& adapter_for(PyTypeObject* type) {
  AdapterCache& c = adapter_cache();
  for (int i = 0; i < AdapterCache::kRecent; ++i)
    if (c.recent_type[i] == type) return *c.recent[i];
  auto it = c.adapters.find(type);
  if (it == c.adapters.end()) {
    TypeAdapter a = make_adapter(type);
    Py_INCREF(type);  // kept for the life of the process: its address can never be reused
    it = c.adapters.emplace(type, a).first;
  }
  c.recent_type[c.next] = type;
  c.recent[c.next] = &it->second;
  c.next = (c.next + 1) % AdapterCache::kRecent;
  return it->second;
}

bool view_array(PyObject* obj, CUstream consumer, ArrayView& view, const char* arg) {
  return view_array(obj, adapter_for(Py_TYPE(obj)), consumer, view, arg);
}

namespace {

bool view_by_protocol(PyObject* obj, const TypeAdapter& a, CUstream consumer, ArrayView& view, const char* arg) {
  switch (a.protocol) {
    case Protocol::jitbridge: return view_own(obj, consumer, view, arg);
    case Protocol::exchange_api: view_exchange(obj, *a.api, consumer, view, arg); return true;
    case Protocol::dlpack: view_dlpack(obj, consumer, view, arg); return true;
    case Protocol::cuda_array_interface: view_cai(obj, consumer, view, arg); return true;
    case Protocol::cupy_fields:
    case Protocol::numba_fields: view_fields_checked(obj, a, consumer, view, arg); return true;
    case Protocol::none: return a.instance_probe && view_instance(obj, consumer, view, arg);
  }
  return false;
}

}  // namespace

bool view_array(PyObject* obj, const TypeAdapter& a, CUstream consumer, ArrayView& view, const char* arg) {
  consumer = normalize_stream(consumer);
  try {
    const bool got = view_by_protocol(obj, a, consumer, view, arg);
    // Kept beside the producer's read-only flag (not in it): as_array() views and re-exports keep
    // what the producer said; packing refuses such arrays for non-const pointees.
    // (jitbridge's own views carry the flag of what they view; the launch path reuses views, so
    // every other protocol sets it afresh.)
    if (got && a.protocol != Protocol::jitbridge) view.immutable_producer = a.immutable_producer;
    return got;
  } catch (const InteropError& e) {
    raise_interop(e);
  }
  return false;
}

std::optional<CUstream> parse_stream(py::handle stream, const char* arg) {
  if (stream.is_none()) return std::nullopt;
  PyObject* s = stream.ptr();
  if (PyLong_Check(s) && !PyBool_Check(s)) return stream_from_int(stream_handle(s, arg, "stream"));
  if (PyBool_Check(s))
    throw py::type_error(fmt::format("{}: expected a stream (an int handle or a stream object), got a bool", arg));
  const InternedNames& k = interned_names();
  if (py::object method = optional_attr(s, k.cuda_stream_method, arg)) {
    PyObject* r = PyObject_CallNoArgs(method.ptr());
    if (!r) raise_producer_error(arg);
    const py::object result = py::reinterpret_steal<py::object>(r);
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2)  // the tuple's own size: no __len__ is asked
      throw py::type_error(fmt::format("{}: __cuda_stream__() must return a (version, handle) tuple", arg));
    return stream_from_int(stream_handle(PyTuple_GET_ITEM(r, 1), arg, "the __cuda_stream__() handle"));
  }
  if (py::object handle = optional_attr(s, k.cuda_stream, arg))  // torch.cuda.Stream
    return stream_from_int(stream_handle(handle.ptr(), arg, "stream.cuda_stream"));
  if (py::object handle = optional_attr(s, k.ptr, arg))  // cupy.cuda.Stream / ExternalStream
    return stream_from_int(stream_handle(handle.ptr(), arg, "stream.ptr"));
  throw py::type_error(fmt::format(
      "{}: expected None, an int stream handle, or a stream object (with __cuda_stream__, a torch.cuda.Stream or a "
      "cupy.cuda.Stream), got a {}",
      arg, type_name(stream)));
}

std::optional<CUstream> framework_stream(PyObject* array, int device_id) {
  const TypeAdapter& a = adapter_for(Py_TYPE(array));
  switch (a.protocol) {
    case Protocol::jitbridge:
      if (TensorObject* t = tensor_object(array)) return t->tensor.stream();
      if (ArrayViewObject* v = array_view_object(array)) return v->stream.handle;
      return std::nullopt;
    case Protocol::exchange_api: {
      int id = device_id;
      if (id < 0) {
        DLDevice d = exchange_device(array, *a.api, "array");
        if (!is_cuda(d)) return std::nullopt;
        id = d.device_id;
      }
      return exchange_stream(*a.api, id, "array");
    }
    default:
      // CuPy's current stream on the array's device (not necessarily the current one).
      if (a.cupy) return cupy_stream(device_id >= 0 ? device_id : cupy_array_device(array));
      return std::nullopt;
  }
}

CUstream consumer_stream(py::handle explicit_stream, PyObject* const* objs, std::size_t n, const char* arg) {
  ++stream_generation;  // a new call: framework streams are asked afresh
  if (std::optional<CUstream> s = parse_stream(explicit_stream, arg)) {
    note_consumer_source(*s, explicit_stream.ptr(), nullptr);
    return *s;
  }
  CUstream found = CU_STREAM_LEGACY;
  for (std::size_t i = 0; i < n; ++i) {
    const TypeAdapter& a = adapter_for(Py_TYPE(objs[i]));
    if (a.protocol == Protocol::none) continue;
    if (std::optional<CUstream> s = framework_stream(objs[i], -1)) {
      found = *s;
      note_consumer_source(found, nullptr, objs[i]);
      break;
    }
  }
  // Only objs[0] is viewed before other arguments' conversions can run Python code.
  if (n == 0 || first_tensor_memo.obj != objs[0]) forget_first_tensor();
  return found;
}

}  // namespace jitbridge::python
