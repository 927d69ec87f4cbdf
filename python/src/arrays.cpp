// arrays.cpp — Python arrays to ArrayViews: the per-type adapter cache, the protocols (exchange API,
// __dlpack__, CAI, the CuPy/Numba readers) and the consumer-stream rule.
#include <fmt/format.h>

#include <cstring>
#include <unordered_map>

#include "array_support.hpp"
#include "bindings.hpp"
#include "interop_objects.hpp"
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

bool is_cupy_type(PyTypeObject* type) {
  PyObject* module = PyObject_GetAttr(reinterpret_cast<PyObject*>(type), interned_names().module);
  if (!module) {
    PyErr_Clear();
    return false;
  }
  bool cupy = false;
  if (PyUnicode_Check(module)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(module, &n);
    if (!s) PyErr_Clear();
    else cupy = n >= 4 && std::strncmp(s, "cupy", 4) == 0;  // cupy, cupy._core.core, cupyx...
  }
  Py_DECREF(module);
  return cupy;
}

TypeAdapter make_adapter(PyTypeObject* type) {
  TypeAdapter a;
  if (is_jitbridge_type(type)) {
    a.protocol = Protocol::jitbridge;
    return a;
  }
  a.cupy = is_cupy_type(type);
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
// and strides stay valid meanwhile: the GIL is held and no Python code runs in between.
struct FirstTensorMemo {
  std::uint64_t generation = 0;
  PyObject* obj = nullptr;
  DLTensor tensor{};
};
thread_local FirstTensorMemo first_tensor_memo;

DLDevice exchange_device(PyObject* obj, const DLPackExchangeAPI& api, const char* arg) {
  if (api.dltensor_from_py_object_no_sync) {
    DLTensor t{};
    if (api.dltensor_from_py_object_no_sync(obj, &t) != 0) raise_producer_error(arg);
    first_tensor_memo = {stream_generation, obj, t};
    return t.device;
  }
  DLManagedTensorVersioned* m = nullptr;
  if (api.managed_tensor_from_py_object_no_sync(obj, &m) != 0 || !m) raise_producer_error(arg);
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
  if (api.current_work_stream(kDLCUDA, device_id, &s) != 0) raise_producer_error(arg);
  m = {stream_generation, &api, device_id, normalize_stream(static_cast<CUstream>(s))};
  return m.stream;
}

void view_exchange(PyObject* obj, const DLPackExchangeAPI& api, CUstream consumer, ArrayView& view, const char* arg) {
  if (api.dltensor_from_py_object_no_sync) {
    const FirstTensorMemo& memo = first_tensor_memo;
    if (memo.generation == stream_generation && memo.obj == obj) {
      fill_from_dltensor(memo.tensor, false, view, arg);
    } else {
      DLTensor t;
      if (api.dltensor_from_py_object_no_sync(obj, &t) != 0) raise_producer_error(arg);
      fill_from_dltensor(t, false, view, arg);
    }
  } else {
    DLManagedTensorVersioned* m = nullptr;
    if (api.managed_tensor_from_py_object_no_sync(obj, &m) != 0) raise_producer_error(arg);
    view = view_from_managed(m, arg);
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
    const long type = PyLong_AsLong(PyTuple_GET_ITEM(device, 0));
    if (type == -1 && PyErr_Occurred()) raise_producer_error(arg);
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

void view_cai_dict(PyObject* iface, CUstream consumer, ArrayView& view, const char* arg) {
  const InternedNames& k = interned_names();
  if (!PyDict_Check(iface))
    fail(PyExc_TypeError,
         fmt::format("{}: __cuda_array_interface__ is a {}, not a dict", arg, Py_TYPE(iface)->tp_name));
  auto item = [&](PyObject* key, const char* key_name, bool required) -> PyObject* {
    PyObject* v = PyDict_GetItemWithError(iface, key);  // borrowed
    if (!v && PyErr_Occurred()) throw py::error_already_set();
    if (!v && required)
      fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ has no '{}' key", arg, key_name));
    return v;
  };
  PyObject* version_obj = item(k.version, "version", true);
  PyObject* shape_obj = item(k.shape, "shape", true);
  PyObject* typestr_obj = item(k.typestr, "typestr", true);
  PyObject* data_obj = item(k.data, "data", true);
  PyObject* strides_obj = item(k.strides, "strides", false);
  PyObject* mask_obj = item(k.mask, "mask", false);
  PyObject* stream_obj = item(k.stream, "stream", false);

  const std::int64_t version = int_item(version_obj, arg, "'version'");
  if (version > 3 || version < 0)
    fail(PyExc_ValueError,
         fmt::format("{}: __cuda_array_interface__ version {} is not supported (versions 0 to 3 are)", arg, version));
  if (mask_obj && mask_obj != Py_None)
    fail(PyExc_BufferError, fmt::format("{}: __cuda_array_interface__ has a mask; masked arrays are not supported", arg));
  if (!PyUnicode_Check(typestr_obj))
    fail(PyExc_TypeError, fmt::format("{}: __cuda_array_interface__ 'typestr' is a {}, not a str", arg,
                                      Py_TYPE(typestr_obj)->tp_name));
  Py_ssize_t typestr_len = 0;
  const char* typestr = PyUnicode_AsUTF8AndSize(typestr_obj, &typestr_len);
  if (!typestr) throw py::error_already_set();

  std::uintptr_t ptr = 0;
  bool readonly = false;
  if (data_obj != Py_None) {
    if (!PyTuple_Check(data_obj) || PyTuple_GET_SIZE(data_obj) != 2)
      fail(PyExc_TypeError, fmt::format("{}: __cuda_array_interface__ 'data' must be a (pointer, read_only) tuple", arg));
    const std::int64_t p = int_item(PyTuple_GET_ITEM(data_obj, 0), arg, "'data' pointer");
    if (p < 0) fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ data pointer is negative", arg));
    ptr = static_cast<std::uintptr_t>(p);
    const int ro = PyObject_IsTrue(PyTuple_GET_ITEM(data_obj, 1));
    if (ro < 0) throw py::error_already_set();
    readonly = ro != 0;
  }
  Dims shape, strides;
  int_sequence(shape_obj, shape, arg, "shape");
  const bool has_strides = strides_obj && strides_obj != Py_None;
  if (has_strides) {
    int_sequence(strides_obj, strides, arg, "strides");
    if (strides.size() != shape.size())
      fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ strides has {} entries for {} dimensions", arg,
                                         strides.size(), shape.size()));
  }
  CUstream producer = consumer;
  if (stream_obj && stream_obj != Py_None) {
    const std::int64_t s = int_item(stream_obj, arg, "'stream'");
    if (s == 0)
      fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ stream 0 is not allowed (1 is the legacy "
                                         "default stream, 2 the per-thread one)", arg));
    if (s < 0) fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ stream {} is negative", arg, s));
    producer = stream_from_int(static_cast<std::uintptr_t>(s));
  }
  // Validate fully before asking the driver anything.
  const DLDataType dtype = dtype_from_typestr(std::string_view(typestr, static_cast<std::size_t>(typestr_len)), arg);
  fill_cai_view(ptr, readonly, shape.data(), shape.size(), has_strides ? strides.data() : nullptr, dtype, producer,
                consumer, view, arg);
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
    t->tensor.buffer()->hand_to(consumer);
    return true;
  }
  if (ArrayViewObject* v = array_view_object(obj)) {
    view = v->view;
    if (is_cuda(view.device) && view.size() != 0 && v->stream != consumer)
      stream_wait(view.device.device_id, consumer, v->stream);
    return true;
  }
  fail(PyExc_TypeError, fmt::format("{}: the {} object is not initialised", arg, Py_TYPE(obj)->tp_name));
}

// Objects of a type without a protocol may still carry one in their instance __dict__.
bool view_instance(PyObject* obj, CUstream consumer, ArrayView& view, const char* arg) {
  PyObject* iface = PyObject_GetAttr(obj, interned_names().cai);
  if (iface) {
    py::object owned = py::reinterpret_steal<py::object>(iface);
    view_cai_dict(iface, consumer, view, arg);
    return true;
  }
  PyErr_Clear();
  PyObject* dlpack = PyObject_GetAttr(obj, interned_names().dlpack);
  if (dlpack) {
    Py_DECREF(dlpack);
    view_dlpack(obj, consumer, view, arg);
    return true;
  }
  PyErr_Clear();
  return false;
}

std::uintptr_t stream_handle(PyObject* v, const char* arg, const char* what) {
  if (!PyLong_Check(v) || PyBool_Check(v))
    throw py::type_error(fmt::format("{}: {} is a {}, not an int", arg, what, Py_TYPE(v)->tp_name));
  std::uintptr_t h = 0;
  if (!address_value(v, h, arg)) throw py::value_error(fmt::format("{}: a stream handle cannot be negative", arg));
  return h;
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
  if (!PyErr_Occurred()) fail(PyExc_RuntimeError, fmt::format("{}: the producer failed without an exception", arg));
  py::error_already_set e;
  for (PyObject* known : {PyExc_TypeError, PyExc_ValueError, PyExc_BufferError, PyExc_RuntimeError}) {
    if (e.type().ptr() == known) {
      std::string message = fmt::format("{}: {}", arg, py::str(e.value()).cast<std::string>());
      py::raise_from(e, known, message.c_str());
      throw py::error_already_set();
    }
  }
  throw e;
}

void fill_cai_view(std::uintptr_t ptr, bool readonly, const std::int64_t* shape, std::size_t ndim,
                   const std::int64_t* strides_bytes, DLDataType dtype, CUstream producer, CUstream consumer,
                   ArrayView& view, const char* arg) {
  fill_from_cai(ptr, readonly, shape, ndim, strides_bytes, dtype, {kDLCUDA, 0}, view, arg);
  view.device.device_id = cai_device(ptr, arg);
  if (view.size() != 0 && producer != consumer) stream_wait(view.device.device_id, consumer, producer);
}

int cai_device(std::uintptr_t ptr, const char* arg) {
  static const int count = Device::count();
  if (count <= 1) return 0;
  if (ptr == 0) return current_device();
  int ordinal = 0;
  CUresult rc = driver().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
  if (rc != CUDA_SUCCESS)
    fail(PyExc_ValueError, fmt::format("{}: the driver does not know the data pointer {:#x} ({})", arg, ptr,
                                       DriverError("cuPointerGetAttribute", rc).what()));
  return ordinal;
}

std::int64_t int_item(PyObject* v, const char* arg, const char* what) {
  if (!PyLong_Check(v) || PyBool_Check(v))
    fail(PyExc_TypeError, fmt::format("{}: __cuda_array_interface__ {} holds a {}, not an int", arg, what,
                                      Py_TYPE(v)->tp_name));
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (overflow) fail(PyExc_ValueError, fmt::format("{}: __cuda_array_interface__ {} is out of range", arg, what));
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  return x;
}

void int_sequence(PyObject* seq, Dims& out, const char* arg, const char* what) {
  if (!PyTuple_Check(seq) && !PyList_Check(seq))
    fail(PyExc_TypeError, fmt::format("{}: __cuda_array_interface__ '{}' is a {}, not a tuple", arg, what,
                                      Py_TYPE(seq)->tp_name));
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  out.resize(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = int_item(items[i], arg, what);
}

// A Python int as an address or handle: false when it is negative; throws py::value_error when it does not fit.
bool address_value(PyObject* v, std::uintptr_t& out, const char* arg) {
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow < 0 || (!overflow && x < 0)) return false;
  if (!overflow) {
    out = static_cast<std::uintptr_t>(x);
    return true;
  }
  const unsigned long long u = PyLong_AsUnsignedLongLong(v);  // above INT64_MAX
  if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw py::value_error(fmt::format("{}: the value does not fit 64 bits", arg));
  }
  out = static_cast<std::uintptr_t>(u);
  return true;
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

bool view_array(PyObject* obj, const TypeAdapter& a, CUstream consumer, ArrayView& view, const char* arg) {
  consumer = normalize_stream(consumer);
  try {
    switch (a.protocol) {
      case Protocol::jitbridge: return view_own(obj, consumer, view, arg);
      case Protocol::exchange_api: view_exchange(obj, *a.api, consumer, view, arg); return true;
      case Protocol::dlpack: view_dlpack(obj, consumer, view, arg); return true;
      case Protocol::cuda_array_interface: view_cai(obj, consumer, view, arg); return true;
      case Protocol::cupy_fields:
      case Protocol::numba_fields: view_fields_checked(obj, a, consumer, view, arg); return true;
      case Protocol::none: return a.instance_probe && view_instance(obj, consumer, view, arg);
    }
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
  if (py::hasattr(stream, "__cuda_stream__")) {
    py::object r = stream.attr("__cuda_stream__")();
    if (!py::isinstance<py::tuple>(r) || py::len(r) != 2)
      throw py::type_error(fmt::format("{}: __cuda_stream__() must return a (version, handle) tuple", arg));
    return stream_from_int(stream_handle(PyTuple_GET_ITEM(r.ptr(), 1), arg, "the __cuda_stream__() handle"));
  }
  if (py::hasattr(stream, "cuda_stream"))  // torch.cuda.Stream
    return stream_from_int(stream_handle(stream.attr("cuda_stream").ptr(), arg, "stream.cuda_stream"));
  if (py::hasattr(stream, "ptr"))  // cupy.cuda.Stream / ExternalStream
    return stream_from_int(stream_handle(stream.attr("ptr").ptr(), arg, "stream.ptr"));
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
      if (ArrayViewObject* v = array_view_object(array)) return v->stream;
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
  if (std::optional<CUstream> s = parse_stream(explicit_stream, arg)) return *s;
  for (std::size_t i = 0; i < n; ++i) {
    const TypeAdapter& a = adapter_for(Py_TYPE(objs[i]));
    if (a.protocol == Protocol::none) continue;
    if (std::optional<CUstream> s = framework_stream(objs[i], -1)) return *s;
  }
  return CU_STREAM_LEGACY;
}

}  // namespace jitbridge::python
