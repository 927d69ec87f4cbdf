// jitbridge_testing.cpp — the test-only extension module jitbridge_testing (never installed): synthetic DLPack
// capsules and exchange-API producers over host memory, a deleter counter, and the reads of jitbridge._core's own
// state (the adapter a type got, the CuPy stream reader, a Tensor's buffer owners, a kernel's shortcuts, packed
// arguments and CUfunction) through the versioned `_core._internals` table (python/src/internals.hpp).
// docs/DESIGN.md, "Python bindings layout", says why it is a module of its own.
#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "bindings.hpp"
#include "internals.hpp"
#include "testing.hpp"
#include "interop/array_support.hpp"
#include "interop/interop_objects.hpp"

namespace jitbridge::python {
namespace {

std::atomic<long> g_deletes{0};  // deleters run by synthetic tensors

// Host memory with a synthetic DLPack tensor (both flavours) over it.
struct TestTensor {
  std::vector<std::int64_t> shape, strides;
  std::vector<unsigned char> storage;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
};

void delete_versioned(DLManagedTensorVersioned* m) {
  ++g_deletes;
  delete static_cast<TestTensor*>(m->manager_ctx);
}
void delete_legacy(DLManagedTensor* m) {
  ++g_deletes;
  delete static_cast<TestTensor*>(m->manager_ctx);
}

// Bytes to back `shape` (64 when it is empty, negative or absurd: such views are refused or never read).
std::size_t backing_bytes(const std::vector<std::int64_t>& shape, DLDataType dtype) {
  std::int64_t n = static_cast<std::int64_t>(itemsize(dtype) ? itemsize(dtype) : 1);
  for (std::int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return 64;
  return n > 0 && n <= (std::int64_t{1} << 24) ? static_cast<std::size_t>(n) : 64;
}

TestTensor* make_test_tensor(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, DLDataType dtype,
                             DLDevice device, int ndim, bool data_null, std::uint32_t major, bool readonly,
                             std::uint64_t byte_offset, unsigned char fill, bool shape_null = false) {
  auto* s = new TestTensor();
  s->shape = std::move(shape);
  s->strides = std::move(strides);
  // An absurd offset is backed by nothing: such views must be refused before anything is read.
  s->storage.assign(backing_bytes(s->shape, dtype) + (byte_offset <= (std::uint64_t{1} << 24) ? byte_offset : 0), fill);
  for (DLTensor* t : {&s->versioned.dl_tensor, &s->legacy.dl_tensor}) {
    t->data = data_null ? nullptr : s->storage.data();
    t->device = device;
    t->ndim = ndim;
    t->dtype = dtype;
    t->shape = shape_null ? nullptr : s->shape.data();
    t->strides = s->strides.empty() ? nullptr : s->strides.data();
    t->byte_offset = byte_offset;
  }
  s->versioned.version = {major, 0};
  s->versioned.manager_ctx = s;
  s->versioned.deleter = delete_versioned;
  s->versioned.flags = readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  s->legacy.manager_ctx = s;
  s->legacy.deleter = delete_legacy;
  return s;
}

// What a synthetic capsule was made as; its destructor deletes the tensor only while the capsule
// still has that name (a consumer that took it renamed it and owns the tensor).
struct CapsuleKind {
  const char* kind;
  const char* name;
  bool legacy;
};
const CapsuleKind kKinds[] = {
    {"versioned", "dltensor_versioned", false}, {"legacy", "dltensor", true},
    {"used", "used_dltensor_versioned", false}, {"used_legacy", "used_dltensor", true},
    {"foreign", "my_tensor", false}, {"unnamed", nullptr, false},
};

void testing_capsule_destructor(PyObject* capsule) {
  ErrorStash stash;  // capsules die while an exception propagates: it must survive this
  const auto* k = static_cast<const CapsuleKind*>(PyCapsule_GetContext(capsule));
  const char* name = PyCapsule_GetName(capsule);
  const bool same_name = name && k && k->name ? std::strcmp(name, k->name) == 0 : k && !name && !k->name;
  if (!same_name) {
    PyErr_Clear();
    return;
  }
  void* p = PyCapsule_GetPointer(capsule, name);
  if (!p) {
    PyErr_Clear();
    return;
  }
  if (k->legacy) delete_legacy(static_cast<DLManagedTensor*>(p));
  else delete_versioned(static_cast<DLManagedTensorVersioned*>(p));
}

// Test input: ints of any sequence, however many (the readers' own limits are what is tested).
std::vector<std::int64_t> test_ints(py::handle seq, const char* arg) {
  std::vector<std::int64_t> out;
  for (py::handle item : py::iter(seq)) out.push_back(int64_of(item.ptr(), arg));
  return out;
}

py::tuple testing_capsule(const std::string& kind, py::handle shape_obj, py::handle strides_obj, py::handle dtype_obj,
                          py::handle device_obj, py::handle ndim_obj, bool data_null, std::uint32_t major, bool readonly,
                          std::uint64_t byte_offset, bool shape_null, py::handle lanes_obj) {
  const CapsuleKind* k = nullptr;
  for (const CapsuleKind& c : kKinds)
    if (kind == c.kind) k = &c;
  if (!k) throw py::value_error(fmt::format("capsule: unknown kind '{}'", kind));
  const std::vector<std::int64_t> shape = test_ints(shape_obj, "shape");
  std::vector<std::int64_t> strides;
  if (!strides_obj.is_none()) strides = test_ints(strides_obj, "strides");
  std::optional<DLDevice> device = parse_device(device_obj, "device");
  std::int64_t ndim = static_cast<std::int64_t>(shape.size());
  if (!ndim_obj.is_none()) ndim = int64_of(ndim_obj.ptr(), "capsule(ndim)");
  if (ndim < INT32_MIN || ndim > INT32_MAX) throw py::value_error("capsule(ndim): out of the int32 range");
  if (ndim > static_cast<std::int64_t>(shape.size()) && !shape_null)
    throw py::value_error("capsule(ndim): more dimensions than shape entries (pass shape_null=True)");
  DLDataType dtype = parse_dtype(dtype_obj, "dtype");
  if (!lanes_obj.is_none()) {
    const std::int64_t lanes = int64_of(lanes_obj.ptr(), "capsule(lanes)");
    if (lanes < 0 || lanes > UINT16_MAX) throw py::value_error("capsule(lanes): out of the uint16 range");
    dtype.lanes = static_cast<std::uint16_t>(lanes);
  }
  TestTensor* t = make_test_tensor(shape, std::move(strides), dtype, device ? *device : DLDevice{kDLCPU, 0},
                                   static_cast<int>(ndim), data_null, major, readonly, byte_offset, 0, shape_null);
  void* managed = k->legacy ? static_cast<void*>(&t->legacy) : static_cast<void*>(&t->versioned);
  PyObject* capsule = PyCapsule_New(managed, k->name, testing_capsule_destructor);
  if (!capsule || PyCapsule_SetContext(capsule, const_cast<CapsuleKind*>(k)) != 0) {
    Py_XDECREF(capsule);
    delete t;
    throw py::error_already_set();
  }
  const std::uintptr_t data = data_null ? 0 : reinterpret_cast<std::uintptr_t>(t->storage.data()) + byte_offset;
  return py::make_tuple(py::reinterpret_steal<py::object>(capsule), data);
}

// ---- a synthetic framework with the DLPack exchange API -----------------------------------------------
// Its arrays are Python objects with _ptr (int), _shape, _strides (elements or None), _dtype (str) and
// _device ((type, id)); the allocator gives host memory filled with 0xAB; to_py_object calls the
// factory given to exchange_api(factory=...) with ptr, shape, dtype, device and an owner
// object that deletes the tensor when it goes.

std::atomic<std::uintptr_t> g_fake_stream{0};
py::object* g_factory = nullptr;  // leaked: outlives the interpreter's module teardown

struct FakeArray {
  std::vector<std::int64_t> shape, strides;
  std::uintptr_t ptr = 0;
  DLDataType dtype{kDLFloat, 32, 1};
  DLDevice device{kDLCPU, 0};
};

FakeArray read_fake(PyObject* obj) {
  py::handle o(obj);
  FakeArray a;
  a.ptr = address_item(py::object(o.attr("_ptr")).ptr(), "_ptr", "the address");
  a.shape = parse_ints(o.attr("_shape"), "_shape", true).to_vector();
  py::object strides = o.attr("_strides");
  if (!strides.is_none()) a.strides = parse_ints(strides, "_strides", true).to_vector();
  a.dtype = parse_dtype(o.attr("_dtype"), "_dtype");
  a.device = *parse_device(o.attr("_device"), "_device");
  return a;
}

template <class F>
int guarded(F&& f) noexcept {
  try {
    f();
    return 0;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return -1;
}

int fake_dltensor(void* obj, DLTensor* out) {
  return guarded([&] {
    thread_local std::int64_t shape[64], strides[64];  // valid until the next call (the API's contract)
    FakeArray a = read_fake(static_cast<PyObject*>(obj));
    if (a.shape.size() > 64) throw std::runtime_error("fake: too many dimensions");
    std::copy(a.shape.begin(), a.shape.end(), shape);
    std::copy(a.strides.begin(), a.strides.end(), strides);
    out->data = reinterpret_cast<void*>(a.ptr);
    out->device = a.device;
    out->ndim = static_cast<std::int32_t>(a.shape.size());
    out->dtype = a.dtype;
    out->shape = shape;
    out->strides = a.strides.empty() ? nullptr : strides;
    out->byte_offset = 0;
  });
}

// The same without any Python call: every object is a float32 (256, 256) CUDA array at 0x7f0000000000,
// so that a loop over view_array measures jitbridge's own cost on the exchange-API path.
int fake_dltensor_fixed(void*, DLTensor* out) {
  static std::int64_t shape[2] = {256, 256};
  out->data = reinterpret_cast<void*>(std::uintptr_t{0x7f0000000000});
  out->device = {kDLCUDA, 0};
  out->ndim = 2;
  out->dtype = {kDLFloat, 32, 1};
  out->shape = shape;
  out->strides = nullptr;
  out->byte_offset = 0;
  return 0;
}

int fake_managed(void* obj, DLManagedTensorVersioned** out) {
  return guarded([&] {
    FakeArray a = read_fake(static_cast<PyObject*>(obj));
    const int ndim = static_cast<int>(a.shape.size());
    TestTensor* t = make_test_tensor(a.shape, a.strides, a.dtype, a.device, ndim, false, 1, false, 0, 0);
    t->versioned.dl_tensor.data = reinterpret_cast<void*>(a.ptr);
    *out = &t->versioned;
  });
}

int fake_current_stream(DLDeviceType, std::int32_t, void** out) {
  *out = reinterpret_cast<void*>(g_fake_stream.load());
  return 0;
}

int fake_allocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* ctx,
                   void (*set_error)(void*, const char*, const char*)) {
  if (prototype->device.device_type != kDLCPU) {
    set_error(ctx, "ValueError", "the fake allocator only gives host memory");
    return -1;
  }
  std::vector<std::int64_t> shape(prototype->shape, prototype->shape + prototype->ndim);
  TestTensor* t = make_test_tensor(shape, {}, prototype->dtype, prototype->device, prototype->ndim, false, 1, false, 0,
                                   0xAB);
  *out = &t->versioned;
  return 0;
}

void fake_owner_destructor(PyObject* capsule) {
  ErrorStash stash;
  auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "fake_owner"));
  if (m) m->deleter(m);
  else PyErr_Clear();
}

int fake_to_py(DLManagedTensorVersioned* m, void** out) {
  return guarded([&] {
    PyObject* owner_raw = PyCapsule_New(m, "fake_owner", fake_owner_destructor);
    if (!owner_raw) {
      m->deleter(m);
      throw py::error_already_set();
    }
    py::object owner = py::reinterpret_steal<py::object>(owner_raw);
    const DLTensor& t = m->dl_tensor;
    Dims shape(t.shape, static_cast<std::size_t>(t.ndim));
    py::object r = (*g_factory)(py::arg("ptr") = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset,
                                py::arg("shape") = to_tuple(shape), py::arg("dtype") = dtype_name(t.dtype),
                                py::arg("device") = py::make_tuple(static_cast<int>(t.device.device_type), t.device.device_id),
                                py::arg("owner") = owner);
    *out = r.release().ptr();
  });
}

py::object testing_exchange_api(bool dltensor, std::uint32_t major, std::uintptr_t stream, py::object factory,
                                bool fixed) {
  struct Tables {
    DLPackExchangeAPI v1{};
    DLPackExchangeAPI head{};
  };
  auto* t = new Tables();  // exchange tables live for the whole process (DLPack's rule)
  t->v1.header.version = {1, 3};
  t->v1.managed_tensor_allocator = fake_allocator;
  t->v1.managed_tensor_from_py_object_no_sync = fake_managed;
  t->v1.managed_tensor_to_py_object_no_sync = fake_to_py;
  t->v1.dltensor_from_py_object_no_sync = fixed ? fake_dltensor_fixed : dltensor ? fake_dltensor : nullptr;
  t->v1.current_work_stream = fake_current_stream;
  DLPackExchangeAPI* table = &t->v1;
  if (major != 1) {
    t->head = t->v1;
    t->head.header.version = {major, 0};
    t->head.header.prev_api = major > 1 ? &t->v1.header : nullptr;
    table = &t->head;
  }
  g_fake_stream = stream;
  if (!g_factory) g_factory = new py::object();
  *g_factory = std::move(factory);
  PyObject* capsule = PyCapsule_New(table, "dlpack_exchange_api", nullptr);
  if (!capsule) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace

const JitbridgeInternals& core_internals() {
  static const JitbridgeInternals* table = nullptr;
  if (table) return *table;
  py::module_::import("jitbridge._core");
  auto* t = static_cast<const JitbridgeInternals*>(PyCapsule_Import(kInternalsCapsule, 0));
  if (!t) {
    py::error_already_set cause;
    throw std::runtime_error(fmt::format(
        "jitbridge_testing: jitbridge._core has no usable _internals table ({}); the jitbridge imported is not "
        "the build this module was made with",
        cause.what()));
  }
  if (t->version != kInternalsVersion || t->size != sizeof(JitbridgeInternals))
    throw std::runtime_error(fmt::format(
        "jitbridge_testing: jitbridge._core's _internals table is version {} ({} bytes), this module needs version "
        "{} ({} bytes): build jitbridge_testing from the same commit as the jitbridge that is imported",
        t->version, t->size, kInternalsVersion, sizeof(JitbridgeInternals)));
  table = t;
  return *table;
}

py::list pack_args(py::handle kernel, const py::tuple& args) {
  PyObject* r =
      core_internals().kernel_pack(kernel.ptr(), &PyTuple_GET_ITEM(args.ptr(), 0), PyTuple_GET_SIZE(args.ptr()));
  if (!r) throw py::error_already_set();
  return py::reinterpret_steal<py::list>(r);
}

}  // namespace jitbridge::python

PYBIND11_MODULE(jitbridge_testing, m) {
  using namespace jitbridge::python;
  m.doc() = "Test hooks of jitbridge (built with the tests, never installed): synthetic DLPack producers and "
            "reads of jitbridge._core's internal state.";
  core_internals();  // a mismatched _core fails the import here, with the reason
  m.def("capsule", &testing_capsule, py::arg("kind") = "versioned", py::arg("shape") = py::make_tuple(2, 3),
        py::arg("strides") = py::none(), py::arg("dtype") = "float32", py::arg("device") = py::none(),
        py::arg("ndim") = py::none(), py::arg("data_null") = false, py::arg("major") = 1, py::arg("readonly") = false,
        py::arg("byte_offset") = 0, py::arg("shape_null") = false, py::arg("lanes") = py::none(),
        "(capsule, data address) of a synthetic DLPack tensor over host memory. kind: versioned, legacy, "
        "used, used_legacy, foreign, unnamed (a capsule without a name). shape_null: a NULL shape pointer; lanes: "
        "the dtype's lanes, overridden. Its deleter adds one to deleter_count().");
  m.def("deleter_count", [] { return g_deletes.load(); }, "How many synthetic DLPack tensors have been deleted.");
  m.def(
      "delete_capsule_without_gil",
      [](py::capsule cap) {
        // Consumes the capsule as a framework would (renamed used_...), then runs the tensor's deleter with the
        // GIL released, as a framework's own thread would.
        const bool versioned = PyCapsule_IsValid(cap.ptr(), "dltensor_versioned") != 0;
        const char* name = versioned ? "dltensor_versioned" : "dltensor";
        void* tensor = PyCapsule_GetPointer(cap.ptr(), name);
        if (!tensor) throw py::error_already_set();
        if (PyCapsule_SetName(cap.ptr(), versioned ? "used_dltensor_versioned" : "used_dltensor") != 0)
          throw py::error_already_set();
        py::gil_scoped_release release;
        if (versioned) {
          auto* t = static_cast<DLManagedTensorVersioned*>(tensor);
          if (t->deleter) t->deleter(t);
        } else {
          auto* t = static_cast<DLManagedTensor*>(tensor);
          if (t->deleter) t->deleter(t);
        }
      },
      py::arg("capsule"),
      "Consumes an unused DLPack capsule and runs its deleter on this thread with the GIL released (a framework "
      "freeing from its own thread).");
  m.def("exchange_api", &testing_exchange_api, py::arg("dltensor") = true, py::arg("major") = 1,
        py::arg("stream") = 0, py::arg("factory") = py::none(), py::arg("fixed") = false,
        "A 'dlpack_exchange_api' capsule over a synthetic framework (see jitbridge_testing.cpp).");
  m.def("adapter_protocol",
        [](py::handle type) {
          const char* name = core_internals().adapter_protocol(type.ptr());
          if (!name) throw py::error_already_set();
          return std::string(name);
        },
        py::arg("type"),
        "The protocol jitbridge._core chose for a type ('exchange_api', 'dlpack', 'cuda_array_interface', "
        "'cupy_fields', 'numba_fields', 'jitbridge', 'none').");
  m.def("cupy_stream_reader", [] { return std::string(core_internals().cupy_stream_reader()); },
        "How jitbridge._core reads CuPy's current stream: through CuPy's exported C function or its Python API "
        "(names it).");
  m.def("cupy_stream_capsule",
        [] {
          // CuPy exports get_stream_ptr(int device_id) to Cython modules as a capsule named by its C signature; this
          // one answers 0 (CuPy's null stream) for every device, for stand-ins of CuPy's modules.
          static std::intptr_t (*const null_stream)(int) = [](int) -> std::intptr_t { return 0; };
          PyObject* c = PyCapsule_New(reinterpret_cast<void*>(null_stream), "intptr_t (int)", nullptr);
          if (!c) throw py::error_already_set();
          return py::reinterpret_steal<py::object>(c);
        },
        "A capsule like CuPy's exported get_stream_ptr (named 'intptr_t (int)'), answering CuPy's null stream (0), "
        "for a stand-in cupy_backends.cuda.stream module's __pyx_capi__.");
  m.def("buffer_refs",
        [](py::handle tensor) {
          const long n = core_internals().tensor_buffer_refs(tensor.ptr());
          if (n < 0) throw py::error_already_set();
          return n;
        },
        py::arg("tensor"),
        "How many owners a jitbridge.Tensor's buffer has (the tensor, its views, unconsumed capsules...).");
  m.def("use_target",
        [](py::object kernel, py::object target) {
          const std::string t = target.is_none() ? std::string() : target.cast<std::string>();
          PyObject* r = core_internals().kernel_use_target(kernel.ptr(), target.is_none() ? nullptr : t.c_str());
          if (!r) throw py::error_already_set();
          return py::reinterpret_steal<py::object>(r);
        },
        py::arg("kernel"), py::arg("target") = py::none(),
        "Binds a RawKernel on the current device to its program's module for `target` (compiled from the request), "
        "as a GPU of that architecture would get; returns (target launched from now, targets built). None: binds "
        "nothing. Forces a second architecture where only one GPU kind is at hand.");
  m.def("shortcut_launches",
        [](py::handle kernel) {
          const long long n = core_internals().kernel_shortcut_launches(kernel.ptr());
          if (n < 0) throw py::error_already_set();
          return n;
        },
        py::arg("kernel"),
        "How many launches of a RawKernel took a launch shortcut (all its shortcuts, every device) so far.");
  m.def("kernel_shortcuts",
        [](py::handle kernel) {
          PyObject* r = core_internals().kernel_shortcuts(kernel.ptr());
          if (!r) throw py::error_already_set();
          return py::reinterpret_steal<py::list>(r);
        },
        py::arg("kernel"),
        "The launch shortcuts a RawKernel has learnt so far, oldest first: a new list of (argument types, usable, "
        "how each argument is read) tuples. TypeError when kernel is no RawKernel.");
  m.def("pack_args",
        [](py::handle kernel, py::args args) { return pack_args(kernel, args); },
        py::arg("kernel"),
        "The bytes a launch of a RawKernel would pass for args (a new list of bytes, one per parameter), packed with "
        "every check of its check_args setting, without launching (no GPU needed). TypeError when kernel is no "
        "RawKernel; the errors a launch raises for the arguments.");
  bind_launch_floors(m);
}
