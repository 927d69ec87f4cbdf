// tensors.cpp — jitbridge.Tensor (DLPack and __cuda_array_interface__ export) and the output allocators
// empty / zeros / empty_like, through jitbridge's stream-ordered buffers or a framework's own allocator.
#include <fmt/format.h>

#include <cstring>

#include "bindings.hpp"
#include "interop/allocators.hpp"
#include "interop/host_copy.hpp"
#include "interop/interop_objects.hpp"
#include "interop/stream_owners.hpp"
#include "jitbridge/device.hpp"
#include "jitbridge/dlpack_export.hpp"

namespace jitbridge::python {
namespace {

py::object tensor_dlpack(const TensorObject& self, py::handle stream, py::handle max_version, py::handle dl_device,
                         py::handle copy) {
  const DeviceTensor& t = self.tensor;
  if (asks_for_host(dl_device)) return tensor_dlpack_to_host(t, stream, max_version, dl_device, copy);
  const DlpackRequest r = parse_dlpack_request(stream, max_version, dl_device, copy, t.view().device, "Tensor.__dlpack__");
  DeviceTensor exported = r.copy ? t.copy() : t;
  // The consumer's int (cupy.from_dlpack, torch.from_dlpack pass their current stream): its owner
  // is looked up only when the hand-off will store it.
  if (r.consumer && !exported.buffer()->needs_no_hand_off(*r.consumer))
    exported.buffer()->hand_to(owned_stream(*r.consumer, t.device()));
  return dlpack_capsule(exported.view(), r.versioned, r.copy ? DLPACK_FLAG_BITMASK_IS_COPIED : std::uint64_t{0});
}

py::dict tensor_cai(const TensorObject& self) {
  const DeviceTensor& t = self.tensor;
  const std::string typestr = typestr_of(t.view().dtype);
  py::dict d;
  d["shape"] = to_tuple(t.view().shape);
  d["typestr"] = typestr;
  py::list descr;
  descr.append(py::make_tuple(cai_descr_name(t.view().dtype), typestr));
  d["descr"] = descr;
  d["data"] = py::make_tuple(reinterpret_cast<std::uintptr_t>(t.view().ptr()), false);
  d["strides"] = py::none();  // always C-contiguous
  d["stream"] = stream_value(t.stream());
  d["version"] = 3;
  return d;
}

std::string tensor_repr(const TensorObject& self) {
  const DeviceTensor& t = self.tensor;
  return fmt::format("jitbridge.Tensor(shape={}, dtype='{}', device='{}', ptr={:#x}, stream={})",
                     dims_text(t.view().shape), dtype_name(t.view().dtype), device_name(t.view().device),
                     reinterpret_cast<std::uintptr_t>(t.view().ptr()), stream_to_int(t.stream()));
}

// ---- allocation through a framework's own allocator (DLPack exchange API) -----------------------------

struct AllocatorError {
  bool set = false;
  std::string kind, message;
};

void set_allocator_error(void* ctx, const char* kind, const char* message) {
  try {
    auto* e = static_cast<AllocatorError*>(ctx);
    e->set = true;
    e->kind = kind ? kind : "";
    e->message = message ? message : "";
  } catch (...) {
  }
}

struct ManagedDeleter {
  void operator()(DLManagedTensorVersioned* m) const {
    if (m && m->deleter) m->deleter(m);
  }
};

// A new array of `type`'s framework, allocated by that framework (managed_tensor_allocator), on
// `device`; zeroed on the framework's current stream when `zero`; `explicit_stream`, if any, then
// waits for that stream. Returns the framework's own Python object.
py::object framework_empty(PyTypeObject* type, const Dims& shape, DLDataType dtype, DLDevice device,
                           std::optional<CUstream> explicit_stream, bool zero, const char* arg) {
  const TypeAdapter& a = adapter_for(type);
  if (a.protocol != Protocol::exchange_api || !a.api->managed_tensor_allocator ||
      !a.api->managed_tensor_to_py_object_no_sync)
    throw py::type_error(fmt::format(
        "{}: {} has no DLPack exchange API (__dlpack_c_exchange_api__) with an allocator; jitbridge allocates "
        "through a framework only that way (leave it out for a jitbridge.Tensor)",
        arg, type->tp_name));
  const DLPackExchangeAPI& api = *a.api;
  try {
    validate_shape(shape, dtype, arg);  // refused here rather than by the framework's allocator
  } catch (const InteropError& e) {
    raise_interop(e);
  }
  DLTensor prototype{};
  prototype.device = device;
  prototype.ndim = static_cast<std::int32_t>(shape.size());
  prototype.dtype = dtype;
  prototype.shape = const_cast<std::int64_t*>(shape.data());
  DLManagedTensorVersioned* raw = nullptr;
  AllocatorError error;
  if (api.managed_tensor_allocator(&prototype, &raw, &error, &set_allocator_error) != 0 || !raw) {
    if (PyErr_Occurred()) throw py::error_already_set();
    const std::string message = fmt::format("{}: the {} allocator failed: {}{}{}", arg, type->tp_name, error.kind,
                                            error.kind.empty() ? "" : ": ", error.message);
    if (error.kind == "MemoryError" || error.kind == "OutOfMemoryError") {
      PyErr_SetString(PyExc_MemoryError, message.c_str());
      throw py::error_already_set();
    }
    if (error.kind == "ValueError") throw py::value_error(message);
    if (error.kind == "TypeError") throw py::type_error(message);
    throw std::runtime_error(message);
  }
  std::unique_ptr<DLManagedTensorVersioned, ManagedDeleter> managed(raw);  // deleted on every error path
  const DLTensor& t = raw->dl_tensor;
  ArrayView allocated;  // what the allocator gave, validated before anything is written to it
  std::size_t bytes = 0;
  try {
    fill_from_dltensor(t, false, allocated, arg);
    bytes = static_cast<std::size_t>(allocated.nbytes());
  } catch (const InteropError& e) {
    raise_interop(e);
  }
  bool as_asked = allocated.is_c_contiguous() && allocated.shape.size() == shape.size();
  for (std::size_t i = 0; as_asked && i < shape.size(); ++i) as_asked = allocated.shape[i] == shape[i];
  if (!as_asked)
    throw py::value_error(fmt::format("{}: the {} allocator returned a {} array with strides {}, not a C-contiguous "
                                      "{} one",
                                      arg, type->tp_name, dims_text(allocated.shape), dims_text(allocated.strides),
                                      dims_text(shape)));
  char* data = static_cast<char*>(allocated.ptr());
  if (is_cuda(t.device)) {
    void* s = nullptr;
    if ((zero || explicit_stream) && api.current_work_stream(kDLCUDA, t.device.device_id, &s) != 0)
      raise_python_error(PyExc_RuntimeError, fmt::format("{}: current_work_stream failed", arg));
    const CUstream framework = normalize_stream(static_cast<CUstream>(s));
    if (zero && bytes) {
      ContextGuard guard(Device::get(t.device.device_id));
      check(driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(data), 0, bytes, framework), "cuMemsetD8Async");
    }
    if (explicit_stream) stream_wait(t.device.device_id, *explicit_stream, framework);
  } else if (zero && bytes) {
    std::memset(data, 0, bytes);
  }
  void* out = nullptr;
  if (api.managed_tensor_to_py_object_no_sync(managed.release(), &out) != 0 || !out)
    raise_python_error(PyExc_RuntimeError, fmt::format("{}: managed_tensor_to_py_object_no_sync failed", arg));
  return py::reinterpret_steal<py::object>(static_cast<PyObject*>(out));
}

// A jitbridge.Tensor from `allocator` (None: the allocator that applies on this thread; jitbridge.allocators).
py::object new_tensor(const Dims& shape, DLDataType dtype, int device, StreamRef stream, bool zero, const char* arg,
                      py::handle allocator_obj) {
  const std::shared_ptr<DeviceAllocator> allocator =
      allocator_argument(allocator_obj, fmt::format("{}(allocator)", arg).c_str());
  TensorObject out;
  try {
    out.tensor = DeviceTensor::empty(shape, dtype, device, std::move(stream), allocator.get());
  } catch (const InteropError& e) {
    raise_interop(InteropError(e.kind(), fmt::format("{}: {}", arg, e.what())));
  }
  if (zero) out.tensor.fill_zero();
  return py::cast(std::move(out));
}

// allocator= goes with jitbridge's own Tensors only: with a framework allocating (like=, x of a framework with
// the exchange API) it is refused rather than ignored.
void refuse_allocator(py::handle allocator, const char* fn, const char* why) {
  if (!allocator.is_none())
    throw py::type_error(fmt::format("{}(allocator): {} allocates this array itself; allocator= applies to "
                                     "jitbridge.Tensor outputs (leave one of them out)",
                                     fn, why));
}

py::object empty_impl(py::handle shape_obj, py::handle dtype_obj, py::handle device_obj, py::handle stream_obj,
                      py::handle like, py::handle allocator, bool zero) {
  const char* fn = zero ? "zeros" : "empty";
  const Dims shape = parse_shape(shape_obj, fmt::format("{}(shape)", fn).c_str());
  const DLDataType dtype = parse_dtype(dtype_obj, fmt::format("{}(dtype)", fn).c_str());
  const std::optional<DLDevice> device = parse_device(device_obj, fmt::format("{}(device)", fn).c_str());
  const std::string stream_arg = fmt::format("{}(stream)", fn);
  if (!like.is_none()) {
    const std::optional<CUstream> stream = parse_stream(stream_obj, stream_arg.c_str());  // only waited on
    PyTypeObject* type = PyType_Check(like.ptr()) ? reinterpret_cast<PyTypeObject*>(like.ptr()) : Py_TYPE(like.ptr());
    refuse_allocator(allocator, fn, "like= names a framework that");
    return framework_empty(type, shape, dtype, device ? *device : DLDevice{kDLCUDA, current_device()}, stream, zero,
                           fmt::format("{}(like)", fn).c_str());
  }
  const int ordinal = device && device->device_type == kDLCUDA ? device->device_id : current_device();
  std::optional<StreamRef> stream = parse_stream_ref(stream_obj, ordinal, stream_arg.c_str());  // stored
  if (device && device->device_type != kDLCUDA)
    throw py::value_error(fmt::format("{}(device): jitbridge allocates CUDA memory only; for host memory pass "
                                      "like=<an array type with the DLPack exchange API>, e.g. torch.Tensor",
                                      fn));
  return new_tensor(shape, dtype, ordinal, stream ? std::move(*stream) : StreamRef(), zero, fn, allocator);
}

py::object empty_like(py::handle x, py::handle dtype_obj, py::handle stream_obj, py::handle allocator) {
  const char* arg = "empty_like(x)";
  PyObject* o = x.ptr();
  // consumer_stream() notes where the stream came from (the stream= object, x), for the owner below.
  const CUstream consumer = consumer_stream(stream_obj, &o, 1, stream_obj.is_none() ? "stream" : "empty_like(stream)");
  const ConsumerSource source = consumer_source();
  std::optional<CUstream> explicit_stream;
  if (!stream_obj.is_none()) explicit_stream.emplace(consumer);
  ArrayView v;
  if (!view_array(o, consumer, v, arg))
    throw py::type_error(fmt::format("{}: a {} is not an array", arg, type_name(x)));
  const DLDataType dtype = dtype_obj.is_none() ? v.dtype : parse_dtype(dtype_obj, "empty_like(dtype)");
  const TypeAdapter& a = adapter_for(Py_TYPE(o));
  if (a.protocol == Protocol::exchange_api && a.api->managed_tensor_allocator) {
    refuse_allocator(allocator, "empty_like", "x's framework (it has the DLPack exchange API)");
    return framework_empty(Py_TYPE(o), v.shape, dtype, v.device, explicit_stream, false, arg);
  }
  if (!is_cuda(v.device))
    throw py::value_error(fmt::format("{}: x is in {} memory; jitbridge allocates CUDA memory only (frameworks with "
                                      "the DLPack exchange API allocate their own)",
                                      arg, device_name(v.device)));
  renote_consumer_source(source);  // the producer and the dtype may have run Python code (a nested call)
  return new_tensor(v.shape, dtype, v.device.device_id, consumer_stream_ref(consumer, v.device.device_id), false,
                    "empty_like", allocator);
}

}  // namespace

void bind_tensors(py::module_& m) {
  auto cls = public_class(py::class_<TensorObject>(m, "Tensor", py::is_final(), R"(A C-contiguous CUDA array owned by jitbridge (jitbridge.empty, zeros, empty_like).

Its memory is allocated in stream order (cuMemAllocAsync) on its stream and freed in stream order
when the last owner lets go (this object, DLPack capsules handed out, views): work already queued
that uses it stays valid. `stream` is the stream the contents are ordered on: the allocation
stream, then the last stream it was handed to (a launch, or __dlpack__(stream=...)).
It keeps alive every stream it stores (the allocation stream, the streams it was handed to)
until its memory is freed: the stream object given as stream=, the one the stream came from, or
CuPy's current Stream object; a raw int handle that is none of those must outlive the tensor
(as with torch.Tensor.record_stream).
Exports __dlpack__ / __dlpack_device__ and __cuda_array_interface__ (v3), so torch.from_dlpack,
cupy.from_dlpack / cupy.asarray, jax.dlpack.from_dlpack and numba.cuda.as_cuda_array take it
without a copy. Made by empty(), zeros(), empty_like() and asarray() only.)"));
  register_tensor_type(reinterpret_cast<PyTypeObject*>(cls.ptr()));
  not_made_directly(cls, "empty(), zeros(), empty_like() and asarray() give Tensors");
  cls.def_property_readonly("shape", [](const TensorObject& t) { return to_tuple(t.tensor.view().shape); },
                            "The shape, a tuple of ints.")
      .def_property_readonly("strides", [](const TensorObject& t) { return to_tuple(t.tensor.view().strides); },
                             "Strides in elements.")
      .def_property_readonly("dtype", [](const TensorObject& t) { return dtype_name(t.tensor.view().dtype); },
                             "The element type's name: 'float32', 'bfloat16', ...")
      .def_property_readonly("device", [](const TensorObject& t) { return device_name(t.tensor.view().device); },
                             "'cuda:N'.")
      .def_property_readonly("ptr",
                             [](const TensorObject& t) { return reinterpret_cast<std::uintptr_t>(t.tensor.view().ptr()); },
                             "The device address of element 0 (an int).")
      .def_property_readonly("nbytes", [](const TensorObject& t) { return t.tensor.nbytes(); }, "size * itemsize.")
      .def_property_readonly("size", [](const TensorObject& t) { return t.tensor.view().size(); },
                             "The number of elements.")
      .def_property_readonly("ndim", [](const TensorObject& t) { return t.tensor.view().ndim(); }, "len(shape).")
      .def_property_readonly("itemsize", [](const TensorObject& t) { return itemsize(t.tensor.view().dtype); },
                             "Bytes per element.")
      .def_property_readonly("stream", [](const TensorObject& t) { return stream_value(t.tensor.stream()); },
                             "The stream the contents are ordered on, as the array API writes it (1: the legacy "
                             "default stream, 2: the per-thread one, else the handle).")
      .def_property_readonly("__cuda_array_interface__", &tensor_cai,
                             "The CUDA array interface (v3), for Numba and CuPy; its 'stream' is the tensor's "
                             "stream.")
      .def("__dlpack__", &tensor_dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
           R"(A DLPack capsule of this tensor (array API standard).

stream: the consumer's stream (None: the legacy default stream; 1 legacy, 2 per-thread, else a
handle; -1: no synchronisation). Unless -1, that stream waits for the tensor's stream (an event,
no host sync), becomes the tensor's stream, and the tensor's memory is freed only after the work
queued on it. The tensor keeps that stream alive when it is CuPy's current Stream (torch's and the
default streams need nothing); any other handle must outlive the tensor. max_version >= (1, 0)
gives a versioned capsule, else a legacy one. dl_device must be this tensor's device
(BufferError otherwise) or the host, (1, 0): then a host copy is handed over (copy True or None;
False is a BufferError), copied on the tensor's stream (or on `stream`, after it waits for the
tensor's) and finished before this returns, since a host consumer cannot wait on a stream
(numpy.from_dlpack(t, device='cpu')). copy=True exports a fresh copy (queued on the tensor's
stream); None and False never copy on the device. The capsule keeps the memory alive until its consumer
deletes it, or until the capsule itself goes if no one consumed it.)")
      .def("__dlpack_device__",
           [](const TensorObject& t) { return py::make_tuple(static_cast<int>(kDLCUDA), t.tensor.device()); },
           "(2, N): DLPack's numbers for cuda:N.")
      .def("__repr__", &tensor_repr, "The shape, dtype, device and address.");

  m.def(
      "empty",
      [](py::handle shape, py::handle dtype, py::handle device, py::handle stream, py::handle like,
         py::handle allocator) { return empty_impl(shape, dtype, device, stream, like, allocator, false); },
      py::arg("shape"), py::arg("dtype"), py::arg("device") = py::none(), py::arg("stream") = py::none(),
      py::arg("like") = py::none(), py::kw_only(), py::arg("allocator") = py::none(),
      R"(An uninitialised array.

Without `like`: a jitbridge.Tensor on `device` (None: the current CUDA device; an ordinal or
'cuda:N'), allocated in stream order on `stream` (None: the legacy default stream). A stream
object (CuPy or torch Stream, any __cuda_stream__ provider) is kept alive by the tensor; an int
handle must outlive the tensor unless it is CuPy's current stream (whose Stream object is kept).
With like=<array or array type> whose type has the DLPack exchange API (torch.Tensor): that
framework allocates it (torch's caching allocator, on torch's current stream) and an object of
that framework comes back; device may then be 'cpu'; `stream`, if given, waits for the
framework's stream (allocator= is then a TypeError). dtype: 'float32', 'bfloat16', numpy or
torch dtypes...
allocator: where a jitbridge.Tensor's memory comes from for this call (None: the allocator that
applies now, jitbridge.get_allocator(); jitbridge.allocators says how it is called). It is
asked for the bytes on `stream`, and its deallocate(ptr, size, stream) gets the same stream
when the tensor goes, after every stream the tensor was handed to.
Raises TypeError/ValueError for bad arguments, NoDriverError without a driver, DriverError when
the allocation fails.)");
  m.def(
      "zeros",
      [](py::handle shape, py::handle dtype, py::handle device, py::handle stream, py::handle like,
         py::handle allocator) { return empty_impl(shape, dtype, device, stream, like, allocator, true); },
      py::arg("shape"), py::arg("dtype"), py::arg("device") = py::none(), py::arg("stream") = py::none(),
      py::arg("like") = py::none(), py::kw_only(), py::arg("allocator") = py::none(),
      "As empty(), with the memory set to zero in stream order (cuMemsetD8Async on the array's stream).");
  m.def("empty_like", &empty_like, py::arg("x"), py::arg("dtype") = py::none(), py::arg("stream") = py::none(),
        py::kw_only(), py::arg("allocator") = py::none(),
        R"(An uninitialised C-contiguous array with x's shape, device and dtype (or `dtype`).

If type(x) has the DLPack exchange API (torch.Tensor), x's framework allocates it and returns its
own type (a torch.Tensor, counted by torch.cuda.memory_allocated()). Otherwise a jitbridge.Tensor
on x's device, allocated in stream order on the consumer stream (stream=, else x's framework's
current stream, else the legacy default stream), which the tensor keeps alive (the stream= object,
x's own, CuPy's current Stream), from `allocator` as empty() says. ValueError for host arrays of
other frameworks.)");
}

}  // namespace jitbridge::python
