// framework_arrays.cpp — fast readers for cupy.ndarray and numba's DeviceNDArray: the fields their
// __cuda_array_interface__ would carry, read from their attributes (each builds its CAI dict in
// Python, ~0.9 us an array), and CuPy's current stream asked once per call.
#include <fmt/format.h>

#include <cstring>

#include "common/descriptor_reads.hpp"
#include "interop/array_support.hpp"
#include "jitbridge/streams.hpp"

namespace jitbridge::python {
namespace {

py::object attr(PyObject* obj, PyObject* name) {
  PyObject* v = PyObject_GetAttr(obj, name);
  if (!v) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(v);
}

// NumPy dtype objects -> DLDataType. Arrays carry few distinct dtype objects (NumPy's builtin ones
// are singletons), so a short list suffices; its entries hold references, so an address is never
// reused by another dtype while listed. Unlisted dtypes are parsed from their typestr (dtype.str).
struct DtypeCache {
  static constexpr int kSlots = 32;
  PyObject* keys[kSlots] = {};
  DLDataType values[kSlots] = {};
  int used = 0;
};
DtypeCache g_dtypes;

// A dtype object seen before: its DLDataType without asking it anything.
bool known_dtype(PyObject* dtype, DLDataType& out) {
  for (int i = 0; i < g_dtypes.used; ++i)
    if (g_dtypes.keys[i] == dtype) {
      out = g_dtypes.values[i];
      return true;
    }
  return false;
}

DLDataType dtype_of(PyObject* dtype, const char* arg) {
  DLDataType known{};
  if (known_dtype(dtype, known)) return known;
  py::object str = attr(dtype, interned_names().str);
  if (!PyUnicode_Check(str.ptr()))
    fail(PyExc_TypeError, fmt::format("{}: dtype.str is a {}, not a str", arg, Py_TYPE(str.ptr())->tp_name));
  const DLDataType parsed = dtype_from_typestr(utf8_of(str.ptr(), Subject(arg, ": dtype.str")), arg);
  if (g_dtypes.used < DtypeCache::kSlots) {
    Py_INCREF(dtype);
    g_dtypes.keys[g_dtypes.used] = dtype;
    g_dtypes.values[g_dtypes.used] = parsed;
    ++g_dtypes.used;
  }
  return parsed;
}

std::uintptr_t address_of(PyObject* v, const char* arg, const char* what) {
  return v == Py_None ? 0 : address_item(v, arg, what);
}

bool type_is(PyTypeObject* type, const char* module, const char* qualname) {
  const InternedNames& k = interned_names();
  PyObject* t = reinterpret_cast<PyObject*>(type);
  auto equals = [&](PyObject* name, const char* expected) {
    PyObject* v = PyObject_GetAttr(t, name);
    if (!v) {
      PyErr_Clear();
      return false;
    }
    const char* s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : nullptr;
    if (!s) PyErr_Clear();
    const bool same = s && std::strcmp(s, expected) == 0;
    Py_DECREF(v);
    return same;
  };
  return equals(k.module, module) && equals(k.qualname, qualname);
}

// shape, strides (bytes) and dtype, which CuPy and Numba arrays both carry as NumPy does.
struct Layout {
  Dims shape, strides;
  DLDataType dtype{};
};

void read_layout(PyObject* obj, Layout& out, const char* arg) {
  const InternedNames& k = interned_names();
  int_sequence(attr(obj, k.shape).ptr(), out.shape, arg, "shape");
  int_sequence(attr(obj, k.strides).ptr(), out.strides, arg, "strides");
  if (out.strides.size() != out.shape.size())
    fail(PyExc_ValueError,
         fmt::format("{}: strides has {} entries for {} dimensions", arg, out.strides.size(), out.shape.size()));
  out.dtype = dtype_of(attr(obj, k.dtype).ptr(), arg);
}

// cupy.ndarray: data.ptr, data.device_id, shape, strides (bytes), dtype; never read-only.
void view_cupy(PyObject* obj, CUstream consumer, ArrayView& view, const char* arg) {
  const InternedNames& k = interned_names();
  py::object data = attr(obj, k.data);
  const std::uintptr_t ptr = address_of(attr(data.ptr(), k.ptr).ptr(), arg, "data.ptr");
  const std::int64_t device = int_item(attr(data.ptr(), k.device_id).ptr(), arg, "data.device_id");
  if (device < 0 || device > INT32_MAX)
    fail(PyExc_ValueError, fmt::format("{}: data.device_id {} is not a device ordinal", arg, device));
  Layout layout;
  read_layout(obj, layout, arg);
  fill_from_cai(ptr, false, layout.shape.data(), layout.shape.size(), layout.strides.data(), layout.dtype,
                {kDLCUDA, static_cast<std::int32_t>(device)}, view, arg);  // InteropError: view_array translates
  if (view.size() == 0) return;
  std::optional<CUstream> producer = cupy_stream(view.device.device_id);
  if (producer && *producer != consumer) stream_wait(view.device.device_id, consumer, *producer);
}

// numba DeviceNDArray: device_ctypes_pointer.value, shape, strides (bytes), dtype, and the stream
// the array is bound to (0: none), as its CAI reports them.
void view_numba(PyObject* obj, CUstream consumer, ArrayView& view, const char* arg) {
  const InternedNames& k = interned_names();
  py::object pointer = attr(obj, k.device_ctypes_pointer);
  const std::uintptr_t ptr = address_of(attr(pointer.ptr(), k.value).ptr(), arg, "device_ctypes_pointer.value");
  Layout layout;
  read_layout(obj, layout, arg);
  py::object stream = attr(obj, k.stream);
  CUstream producer = consumer;
  if (!(PyLong_CheckExact(stream.ptr()) && PyLong_AsLongLong(stream.ptr()) == 0)) {
    PyErr_Clear();  // an int out of range: int() below reports it
    PyObject* as_int = PyNumber_Long(stream.ptr());  // a numba Stream: int() is its handle
    if (!as_int) raise_producer_error(arg);
    py::object owned = py::reinterpret_steal<py::object>(as_int);
    producer = stream_from_int(address_of(as_int, arg, "stream"));
  }
  fill_cai_view(ptr, false, layout.shape.data(), layout.shape.size(), layout.strides.data(), layout.dtype, producer,
                consumer, view, arg);
}

// A Python int > 0 (an address) into `out`; false otherwise, with no error set. Where unsigned long holds an address
// (LP64), PyLong_AsUnsignedLong reads the digits in one loop (negative and too large: its OverflowError, cleared);
// elsewhere below 2**63 through PyLong_AsLongLongAndOverflow, which also reads the digits in a loop
// (PyLong_AsUnsignedLongLong converts a multi-digit int through a byte array: every real address has several digits).
bool positive_address(PyObject* v, std::uintptr_t& out) {
  if (!v || !PyLong_CheckExact(v)) return false;
  if constexpr (sizeof(unsigned long) >= sizeof(std::uintptr_t)) {
    const unsigned long u = PyLong_AsUnsignedLong(v);
    if (u == static_cast<unsigned long>(-1) && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    out = static_cast<std::uintptr_t>(u);
    return u > 0;
  }
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (!overflow) {
    if (x == -1 && PyErr_Occurred()) PyErr_Clear();
    out = static_cast<std::uintptr_t>(x);
    return x > 0;
  }
  if (overflow < 0) return false;
  const unsigned long long u = PyLong_AsUnsignedLongLong(v);  // 2**63 and above
  if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  out = static_cast<std::uintptr_t>(u);
  return true;
}

// Owns the new references it is given (the lean readers' attribute results).
struct Refs {
  PyObject* items[4] = {};
  ~Refs() {
    for (PyObject* o : items) Py_XDECREF(o);
  }
};

// PyObject_GetAttr(obj, name) (nullptr for a null `obj`). A type with CPython's generic lookup (no __getattr__ or
// __getattribute__ of its own, as Numba's arrays) is read by that lookup directly: the same answer without
// PyObject_GetAttr's dispatch, whose extra on failure (the AttributeError's context) the readers clear anyway.
PyObject* get(PyObject* obj, PyObject* name) {
  if (!obj) return nullptr;
  return Py_TYPE(obj)->tp_getattro == PyObject_GenericGetAttr ? PyObject_GenericGetAttr(obj, name)
                                                               : PyObject_GetAttr(obj, name);
}

// CuPy's fields are Cython attributes (data descriptors of cupy.ndarray and of cupy.cuda.MemoryPointer): each is
// read through its descriptor, found once per type version (descriptor_reads.hpp).
struct CupyFieldReads {
  DescriptorRead data, ptr, device_id, dtype;
};
CupyFieldReads g_cupy_reads;

PyObject* get(PyObject* obj, PyObject* name, DescriptorRead& r) { return obj ? read_attribute(obj, name, r) : nullptr; }

}  // namespace

bool cupy_pointer_fields(PyObject* obj, PointerFields& out) noexcept {
  const InternedNames& k = interned_names();
  CupyFieldReads& c = g_cupy_reads;
  Refs r;
  r.items[0] = get(obj, k.data, c.data);
  r.items[1] = get(r.items[0], k.ptr, c.ptr);
  r.items[2] = r.items[1] ? get(r.items[0], k.device_id, c.device_id) : nullptr;
  r.items[3] = r.items[2] ? get(obj, k.dtype, c.dtype) : nullptr;
  const bool ok = r.items[3] && positive_address(r.items[1], out.ptr) && PyLong_CheckExact(r.items[2]) &&
                  known_dtype(r.items[3], out.dtype);
  if (ok) out.device = static_cast<int>(PyLong_AsLong(r.items[2]));
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return ok && out.device >= 0;
}

namespace {

// Numba arrays' addresses by their memory object: a DeviceNDArray's address is its gpu_data's
// (a MemoryPointer; views and slices get their own), which never changes, and neither does its
// device. Reading device_ctypes_pointer.value runs a Python property and makes a ctypes object and
// an int each time; this remembers the answer per gpu_data object instead, checked by identity
// through a weak reference (a dead object's slot never answers for a new one at the same address).
// Only with the GIL held; a few slots, replaced in turn.
struct NumbaPointerMemo {
  static constexpr int kSlots = 16;
  struct Slot {
    PyObject* key = nullptr;   // the gpu_data object's address, compared first (borrowed, maybe dead)
    PyObject* ref = nullptr;   // a weak reference to it (owned)
    std::uintptr_t ptr = 0;
    int device = -1;
  };
  Slot slots[kSlots];
  int next = 0;

  static bool refers_to(PyObject* ref, PyObject* obj) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject* target = nullptr;
    if (PyWeakref_GetRef(ref, &target) <= 0) return false;  // dead (0) or not a weakref (-1: cannot happen)
    Py_DECREF(target);
    return target == obj;
#else
    return PyWeakref_GET_OBJECT(ref) == obj;  // the macro: no call (Py_None once dead)
#endif
  }
  const Slot* find(PyObject* gpu_data) const {
    for (const Slot& s : slots)
      if (s.key == gpu_data && s.ref && refers_to(s.ref, gpu_data)) return &s;
    return nullptr;
  }
  void remember(PyObject* gpu_data, std::uintptr_t ptr, int device) {
    PyObject* ref = PyWeakref_NewRef(gpu_data, nullptr);
    if (!ref) {  // not weakly referenceable: not remembered
      PyErr_Clear();
      return;
    }
    Slot& s = slots[next];
    next = (next + 1) % kSlots;
    Py_XDECREF(s.ref);
    s = {gpu_data, ref, ptr, device};
  }
};
NumbaPointerMemo g_numba_pointers;

// Whether `v` is exactly the int 0: CPython's cached 0 (what Numba's default stream is) by identity, else asked.
bool is_int_zero(PyObject* v) {
  // A cached small int, never freed (CPython keeps it too); nullptr, with no error left, if it could not be had.
  static PyObject* const zero = [] {
    PyObject* z = PyLong_FromLong(0);
    if (!z) PyErr_Clear();
    return z;
  }();
  return v == zero || (PyLong_CheckExact(v) && PyLong_AsLong(v) == 0);
}

}  // namespace

bool numba_pointer_fields(PyObject* obj, PointerFields& out) noexcept {
  const InternedNames& k = interned_names();
  Refs r;
  r.items[0] = get(obj, k.stream);  // 0: bound to no stream (else the full path orders it)
  bool ok = r.items[0] && is_int_zero(r.items[0]);
  if (ok) {
    r.items[1] = get(obj, k.gpu_data);
    r.items[2] = r.items[1] ? get(obj, k.dtype) : nullptr;
    ok = r.items[2] && r.items[1] != Py_None && known_dtype(r.items[2], out.dtype);
  }
  if (ok) {
    if (const NumbaPointerMemo::Slot* s = g_numba_pointers.find(r.items[1])) {
      out.ptr = s->ptr;
      out.device = s->device;
      return true;
    }
    r.items[3] = get(obj, k.device_ctypes_pointer);
    PyObject* value = r.items[3] ? PyObject_GetAttr(r.items[3], k.value) : nullptr;
    ok = positive_address(value, out.ptr);
    Py_XDECREF(value);
  }
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  if (!ok) return false;
  try {
    out.device = cai_device(out.ptr, "array");
  } catch (...) {
    PyErr_Clear();
    return false;
  }
  g_numba_pointers.remember(r.items[1], out.ptr, out.device);
  return true;
}

int cupy_array_device(PyObject* obj) noexcept {
  const InternedNames& k = interned_names();
  Refs r;
  r.items[0] = get(obj, k.data);
  r.items[1] = get(r.items[0], k.device_id);
  const long device = r.items[1] && PyLong_CheckExact(r.items[1]) ? PyLong_AsLong(r.items[1]) : -1;
  if (PyErr_Occurred()) PyErr_Clear();
  return device >= 0 && device < 1024 ? static_cast<int>(device) : -1;
}

bool is_cupy_ndarray(PyTypeObject* type) { return type_is(type, "cupy", "ndarray"); }

bool is_numba_device_array(PyTypeObject* type) {
  return type_is(type, "numba.cuda.cudadrv.devicearray", "DeviceNDArray");
}

void view_framework_fields(PyObject* obj, Protocol protocol, CUstream consumer, ArrayView& view, const char* arg) {
  if (protocol == Protocol::cupy_fields) view_cupy(obj, consumer, view, arg);
  else view_numba(obj, consumer, view, arg);
}

namespace {

// CuPy's own answer to "which stream do CuPy's launches on device d use now": the C function
// cupy_backends.cuda.stream.get_stream_ptr(int device_id), which CuPy exports to other Cython
// modules through the module's __pyx_capi__ capsules (each named by the C signature, checked
// here, so a CuPy whose function differs is never called). Found once cupy_backends is imported;
// nullptr otherwise (older CuPy: cupy_current_stream asks CuPy's Python API instead).
using StreamPtrOfDevice = std::intptr_t (*)(int);

StreamPtrOfDevice cupy_stream_ptr_function() {
  static StreamPtrOfDevice fn = nullptr;
  static bool looked = false;
  if (looked) return fn;
  py::object module;
  try {
    module = loaded_module("cupy_backends.cuda.stream");
  } catch (py::error_already_set&) {
    return nullptr;  // sys.modules unreadable: CuPy's Python API is asked instead (and reports)
  }
  if (!module) return nullptr;  // not imported (yet): asked again next time
  looked = true;
  PyObject* capi = PyObject_GetAttrString(module.ptr(), "__pyx_capi__");
  if (!capi) {
    PyErr_Clear();  // no C API: the Python API is used
    return nullptr;
  }
  const py::object owned_capi = py::reinterpret_steal<py::object>(capi);
  static constexpr const char* kSignature = "intptr_t (int)";
  py::object capsule;
  if (PyDict_Check(capi)) {
    try {
      capsule = dict_item(capi, py::str("get_stream_ptr").ptr());
    } catch (py::error_already_set&) {
      return nullptr;
    }
  }
  if (capsule && PyCapsule_IsValid(capsule.ptr(), kSignature))  // the name is the C signature: checked
    fn = reinterpret_cast<StreamPtrOfDevice>(PyCapsule_GetPointer(capsule.ptr(), kSignature));
  PyErr_Clear();  // a failed GetPointer: no function (the extension is never unloaded; fn stays valid)
  return fn;
}

}  // namespace

const char* cupy_stream_reader() {
  return cupy_stream_ptr_function() ? "cupy_backends.cuda.stream.get_stream_ptr" : "cupy.cuda.get_current_stream";
}

std::optional<CUstream> cupy_current_stream(int device_id) {
  if (device_id < 0) device_id = current_device();
  if (StreamPtrOfDevice fn = cupy_stream_ptr_function()) {
    const std::intptr_t ptr = fn(device_id);  // 0: CuPy's null stream (legacy); CuPy maps PTDS itself
    if (PyErr_Occurred()) throw py::error_already_set();
    return stream_from_int(static_cast<std::uintptr_t>(ptr));
  }
  py::object stream = cupy_current_stream_object(device_id);
  if (!stream) return std::nullopt;
  PyObject* ptr = PyObject_GetAttr(stream.ptr(), interned_names().ptr);
  if (!ptr) raise_producer_error("cupy.cuda.get_current_stream()");
  const py::object owned_ptr = py::reinterpret_steal<py::object>(ptr);
  return stream_from_int(address_item(ptr, "cupy.cuda.get_current_stream()", ".ptr"));
}

py::object cupy_current_stream_object(int device_id) {
  // The function is looked up once (cupy stays imported once it was).
  static PyObject* get_current = nullptr;   // cupy.cuda.get_current_stream(device_id)
  if (!get_current) {
    py::object cupy = loaded_module("cupy");  // never imported here
    if (!cupy) return py::object();
    py::object cuda = cupy.attr("cuda");
    get_current = py::object(cuda.attr("get_current_stream")).release().ptr();
  }
  PyObject* s = PyObject_CallFunction(get_current, "i", device_id);
  if (!s && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();  // an older CuPy: the current device's only
    s = PyObject_CallNoArgs(get_current);
  }
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(s);
}

std::optional<CUstream> cupy_stream(int device_id) {
  struct Memo {
    std::uint64_t generation = 0;
    int device = -2;
    std::optional<CUstream> stream;
  };
  thread_local Memo memo;
  if (device_id < 0) device_id = current_device();
  if (memo.generation == call_generation() && memo.device == device_id) return memo.stream;
  std::optional<CUstream> stream = cupy_current_stream(device_id);
  memo = {call_generation(), device_id, stream};
  return stream;
}

}  // namespace jitbridge::python
