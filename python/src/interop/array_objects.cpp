// array_objects.cpp — jitbridge.ArrayView (its fields, __dlpack__ and __cuda_array_interface__),
// jitbridge.as_array and jitbridge.from_ptr.
#include <fmt/format.h>

#include "interop/array_support.hpp"
#include "bindings.hpp"
#include "common/py_keepalive.hpp"
#include "interop/interop_objects.hpp"
#include "interop/stream_owners.hpp"
#include "jitbridge/device.hpp"

namespace jitbridge::python {

// ---- jitbridge.ArrayView, as_array, from_ptr ---------------------------------------------------------

namespace {

std::string view_repr(const ArrayViewObject& v) {
  return fmt::format("jitbridge.ArrayView(ptr={:#x}, shape={}, strides={}, dtype='{}', device='{}'{})",
                     reinterpret_cast<std::uintptr_t>(v.view.ptr()), dims_text(v.view.shape),
                     dims_text(v.view.strides), dtype_name(v.view.dtype), device_name(v.view.device),
                     v.view.readonly ? ", readonly=True" : "");
}

py::object view_dlpack_export(py::object self, py::handle stream, py::handle max_version, py::handle dl_device,
                              py::handle copy) {
  const ArrayViewObject* view = array_view_object(self.ptr());  // ArrayView.__dlpack__(x) may be given anything
  if (!view)
    throw py::type_error(fmt::format("ArrayView.__dlpack__: expected a jitbridge.ArrayView, got a {}",
                                     Py_TYPE(self.ptr())->tp_name));
  const ArrayViewObject& v = *view;
  const DlpackRequest r = parse_dlpack_request(stream, max_version, dl_device, copy, v.view.device, "ArrayView.__dlpack__");
  if (r.copy) throw py::buffer_error("ArrayView.__dlpack__: a view cannot copy (copy=True); export it with copy=None");
  if (r.consumer && is_cuda(v.view.device) && *r.consumer != v.stream.handle)
    stream_wait(v.view.device.device_id, *r.consumer, v.stream.handle);  // the consumer's stream: not stored
  ArrayView exported = v.view;
  exported.owner = python_keepalive(self.ptr());  // the view object, which holds the producer and its stream
  return dlpack_capsule(exported, r.versioned, v.view.readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : std::uint64_t{0});
}

py::dict view_cai_export(const ArrayViewObject& v) {
  if (!is_cuda(v.view.device))
    throw py::attribute_error(fmt::format("a view of {} memory has no __cuda_array_interface__", device_name(v.view.device)));
  const std::string typestr = typestr_of(v.view.dtype);
  const std::int64_t item = static_cast<std::int64_t>(itemsize(v.view.dtype));
  py::dict d;
  d["shape"] = to_tuple(v.view.shape);
  d["typestr"] = typestr;
  py::list descr;
  descr.append(py::make_tuple(cai_descr_name(v.view.dtype), typestr));  // names fp8 dtypes (|V1)
  d["descr"] = descr;
  d["data"] = py::make_tuple(reinterpret_cast<std::uintptr_t>(v.view.ptr()), v.view.readonly);
  if (v.view.is_c_contiguous()) {
    d["strides"] = py::none();
  } else {
    py::tuple strides(v.view.strides.size());
    for (std::size_t i = 0; i < v.view.strides.size(); ++i) {
      std::int64_t bytes = 0;  // fits for valid non-empty views; an empty view's strides may be anything
      if (__builtin_mul_overflow(v.view.strides[i], item, &bytes)) strides[i] = py::int_(v.view.strides[i]) * py::int_(item);
      else strides[i] = py::int_(bytes);
    }
    d["strides"] = strides;
  }
  d["stream"] = stream_value(v.stream.handle);
  d["version"] = 3;
  return d;
}

ArrayViewObject as_array(py::handle obj, py::handle stream) {
  ArrayViewObject out;
  PyObject* o = obj.ptr();
  const CUstream consumer = consumer_stream(stream, &o, 1, "stream");
  const ConsumerSource source = consumer_source();
  if (!view_array(o, consumer, out.view, "as_array(obj)"))
    throw py::type_error(fmt::format(
        "as_array(obj): a {} is not an array (no __dlpack_c_exchange_api__, __dlpack__ or __cuda_array_interface__)",
        type_name(obj)));
  renote_consumer_source(source);  // a producer's __dlpack__ may have made a nested call
  out.stream = consumer_stream_ref(consumer, is_cuda(out.view.device) ? out.view.device.device_id : -1);
  out.keepalive = py::reinterpret_borrow<py::object>(obj);
  return out;
}

ArrayViewObject from_ptr(py::handle ptr_obj, py::handle shape_obj, py::handle dtype_obj, py::handle device_obj,
                         py::handle strides_obj, py::handle owner, bool readonly, py::handle stream) {
  const char* arg = "from_ptr";
  if (!PyLong_Check(ptr_obj.ptr()) || PyBool_Check(ptr_obj.ptr()))
    throw py::type_error(fmt::format("{}: ptr must be an int, got a {}", arg, type_name(ptr_obj)));
  const std::uintptr_t ptr = address_item(ptr_obj.ptr(), arg, "ptr");
  Dims shape = parse_shape(shape_obj, "from_ptr(shape)");
  DLDataType dtype = parse_dtype(dtype_obj, "from_ptr(dtype)");
  std::optional<DLDevice> device = parse_device(device_obj, "from_ptr(device)");
  // A device the driver does not have: refused where there is a driver to ask (without one, a view
  // is a description only, and any launch on it needs a driver, which then refuses it).
  if (device && is_cuda(*device) && try_driver()) {
    const int count = Device::count();
    if (device->device_id >= count)
      throw py::value_error(fmt::format("from_ptr(device): {} does not exist: the CUDA driver sees {} device{}{}",
                                        device_name(*device), count, count == 1 ? "" : "s",
                                        count ? fmt::format(" (cuda:0 to cuda:{})", count - 1) : std::string()));
  }
  Dims strides;
  if (!strides_obj.is_none()) {
    strides = parse_ints(strides_obj, "from_ptr(strides)", true);
    if (strides.size() != shape.size())
      throw py::value_error(
          fmt::format("{}: strides has {} entries for {} dimensions", arg, strides.size(), shape.size()));
  }
  DLTensor t{};
  t.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr));
  t.device = device ? *device : DLDevice{kDLCUDA, current_device()};
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = shape.data();
  t.strides = strides_obj.is_none() ? nullptr : strides.data();
  ArrayViewObject out;
  try {
    out.view = view_from_dltensor(t, readonly, nullptr, arg);
  } catch (const InteropError& e) {
    raise_interop(e);
  }
  std::optional<StreamRef> s = parse_stream_ref(stream, is_cuda(out.view.device) ? out.view.device.device_id : -1,
                                               "from_ptr(stream)");
  out.stream = s ? std::move(*s) : StreamRef();
  out.keepalive = py::reinterpret_borrow<py::object>(owner);
  return out;
}

}  // namespace

void bind_arrays(py::module_& m) {
  auto cls = public_class(py::class_<ArrayViewObject>(m, "ArrayView", py::is_final(), R"(A view of an array from any framework (jitbridge.as_array, jitbridge.from_ptr).

It keeps the producer alive: the object it was made from (or from_ptr's owner) and, for
DLPack producers, the DLPack tensor, whose deleter runs once when the view goes. Fields:
ptr (int, address of element 0), shape, strides (in elements), dtype (str), device
('cuda:0', 'cpu'), readonly, stream (the consumer stream the view was made for, as the
array API writes it: 1 is the legacy default stream, 2 the per-thread one). jitbridge never
frees the memory it views. Made by as_array() and from_ptr() only.)"));
  register_array_view_type(reinterpret_cast<PyTypeObject*>(cls.ptr()));
  not_made_directly(cls, "as_array() and from_ptr() give ArrayViews");
  cls.def_property_readonly("ptr", [](const ArrayViewObject& v) { return reinterpret_cast<std::uintptr_t>(v.view.ptr()); },
                            "The address of element 0 (an int; device memory unless device is 'cpu').")
      .def_property_readonly("shape", [](const ArrayViewObject& v) { return to_tuple(v.view.shape); },
                             "The shape, a tuple of ints.")
      .def_property_readonly("strides", [](const ArrayViewObject& v) { return to_tuple(v.view.strides); },
                             "Strides in elements (not bytes), as the producer gave them (negative ones too).")
      .def_property_readonly("dtype", [](const ArrayViewObject& v) { return dtype_name(v.view.dtype); },
                             "The element type's name: 'float32', 'bfloat16', 'int8', 'bool', ...")
      .def_property_readonly("device", [](const ArrayViewObject& v) { return device_name(v.view.device); },
                             "Where the memory is: 'cuda:N' or 'cpu'.")
      .def_property_readonly("readonly", [](const ArrayViewObject& v) { return v.view.readonly; },
                             "Whether the producer marked it read-only (launches then take it only into const "
                             "pointees).")
      .def_property_readonly("stream", [](const ArrayViewObject& v) { return stream_value(v.stream.handle); },
                             "The consumer stream the view was made for, as the array API writes it (1: the legacy "
                             "default stream, 2: the per-thread one, else the handle).")
      .def_property_readonly("ndim", [](const ArrayViewObject& v) { return v.view.ndim(); }, "len(shape).")
      .def_property_readonly("size", [](const ArrayViewObject& v) { return v.view.size(); },
                             "The number of elements (the product of shape).")
      .def_property_readonly("itemsize", [](const ArrayViewObject& v) { return itemsize(v.view.dtype); },
                             "Bytes per element.")
      .def_property_readonly("nbytes", [](const ArrayViewObject& v) { return v.view.nbytes(); },
                             "size * itemsize, as NumPy counts it (a broadcast view counts every element).")
      .def_property_readonly("is_c_contiguous", [](const ArrayViewObject& v) { return v.view.is_c_contiguous(); },
                             "Whether the elements are dense and row-major (strides as NumPy's C order).")
      .def_property_readonly("obj", [](const ArrayViewObject& v) { return v.keepalive; },
                             "The object the view keeps alive (as_array's argument, from_ptr's owner), or None.")
      .def("__dlpack_device__",
           [](const ArrayViewObject& v) {
             return py::make_tuple(static_cast<int>(v.view.device.device_type), v.view.device.device_id);
           },
           "(device_type, device_id) as DLPack numbers them: (2, N) for cuda:N, (1, 0) for the CPU.")
      .def("__dlpack__", &view_dlpack_export, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
           "Export the viewed memory (no copy; copy=True raises BufferError). The exported tensor keeps this "
           "view, and so its producer, alive; `stream` waits for the view's stream.")
      .def_property_readonly("__cuda_array_interface__", &view_cai_export,
                             "The CUDA array interface (v3) of the viewed memory, for Numba and CuPy; its 'stream' "
                             "is the view's stream.")
      .def("__repr__", &view_repr, "The shape, dtype, device and address.");

  m.def("as_array", &as_array, py::arg("obj"), py::arg("stream") = py::none(),
        R"(A jitbridge.ArrayView of `obj` (no copy), for work on the consumer stream.

Protocols, chosen once per type: the DLPack C exchange API (torch.Tensor), __dlpack__ (with the
consumer stream and max_version=(1, 0), falling back to the legacy form), __cuda_array_interface__
(v0 to v3), and jitbridge's own ArrayView and Tensor. Host (CPU) arrays work too; launches refuse
them. The consumer stream: `stream` (an int handle, or an object with __cuda_stream__, .cuda_stream or
.ptr) if given, else the current stream of obj's framework (torch, CuPy), else the legacy default
stream; the producer's work is ordered before it (events, never a host sync). The view keeps that
stream alive (later uses on other streams wait for it): a stream object itself, CuPy's current
Stream; an int handle that is neither must outlive the view.
Raises TypeError (no array protocol, bad types), ValueError (bad shapes, dtypes, pointers, versions)
or BufferError (consumed or refused DLPack capsules, masks), each naming the problem.)");

  m.def("from_ptr", &from_ptr, py::arg("ptr"), py::arg("shape"), py::arg("dtype"), py::arg("device") = py::none(),
        py::arg("strides") = py::none(), py::arg("owner") = py::none(), py::arg("readonly") = false,
        py::arg("stream") = py::none(),
        R"(A jitbridge.ArrayView over memory at address `ptr` (CuPy's UnownedMemory role).

shape: int or sequence; dtype: a name ('float32', 'bfloat16'), a NumPy or torch dtype; device: None
(the current CUDA device), an ordinal, 'cuda:N' or 'cpu'; strides: in elements, None for
C-contiguous; owner: any object, kept alive as long as the view; stream: the stream the memory is
ready on (None: the legacy default stream; a stream object is kept alive by the view, an int handle
must outlive it unless it is CuPy's current stream). jitbridge does not free the memory: keep it valid
while the view (or a launch using it) may read it, or pass its owner. Nothing is checked on the
device. Raises TypeError for a ptr that is not an int, ValueError for a malformed shape, dtype,
device or strides (each naming the argument).)");
}

}  // namespace jitbridge::python
