// host_copy.cpp — host round trips in Python: Tensor.__dlpack__(dl_device=(kDLCPU, 0)) hands over a host copy
// (NumPy's from_dlpack(t, device="cpu")), and jitbridge.asarray uploads a host array into a new Tensor.
#include "interop/host_copy.hpp"

#include <fmt/format.h>

#include <cstring>

#include "interop/allocators.hpp"
#include "interop/interop_objects.hpp"
#include "interop/stream_owners.hpp"
#include "jitbridge/host_copy.hpp"

namespace jitbridge::python {
namespace {

// The dtype of a buffer-protocol item format ("f", "<d", "=i", "?", "Zf"), native little-endian only;
// nullopt for anything else (structs, big-endian, pointers).
std::optional<DLDataType> buffer_dtype(const char* format, std::size_t item) {
  std::string_view f = format ? format : "B";
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f.remove_prefix(1);
  const std::uint8_t bits = static_cast<std::uint8_t>(item * 8);
  if (item == 0 || item > 16) return std::nullopt;
  if (f == "?") return DLDataType{kDLBool, 8, 1};
  if (f == "e" || f == "f" || f == "d") return DLDataType{kDLFloat, bits, 1};
  if (f == "Zf" || f == "Zd") return DLDataType{kDLComplex, bits, 1};
  if (f.size() == 1 && std::strchr("bhilq", f[0])) return DLDataType{kDLInt, bits, 1};
  if (f.size() == 1 && std::strchr("BHILQ", f[0])) return DLDataType{kDLUInt, bits, 1};
  return std::nullopt;
}

// A view of a buffer-protocol object (bytes, array.array, memoryview) in host memory; the view
// holds the buffer until it goes (released with the GIL).
void view_buffer(PyObject* obj, ArrayView& v, const char* arg) {
  auto taken = std::make_unique<Py_buffer>();
  if (PyObject_GetBuffer(obj, taken.get(), PyBUF_RECORDS_RO) != 0)
    raise_python_error(PyExc_BufferError, fmt::format("{}: its buffer could not be read", arg));
  const std::shared_ptr<Py_buffer> buffer(taken.release(), [](Py_buffer* b) {
    py::gil_scoped_acquire gil;
    PyBuffer_Release(b);
    delete b;
  });
  const std::optional<DLDataType> dtype = buffer_dtype(buffer->format, static_cast<std::size_t>(buffer->itemsize));
  if (!dtype)
    throw py::type_error(fmt::format("{}: a {} of items '{}' ({} bytes) has no dtype jitbridge knows", arg,
                                     Py_TYPE(obj)->tp_name, buffer->format ? buffer->format : "B", buffer->itemsize));
  v.device = {kDLCPU, 0};
  v.dtype = *dtype;
  v.data = buffer->buf;
  v.readonly = buffer->readonly != 0;
  v.shape.resize(static_cast<std::size_t>(buffer->ndim));
  v.strides.resize(static_cast<std::size_t>(buffer->ndim));
  for (int d = 0; d < buffer->ndim; ++d) {
    if (buffer->strides[d] % buffer->itemsize != 0)
      throw py::value_error(fmt::format("{}: stride {} of dimension {} is not a multiple of the item size {}", arg,
                                        buffer->strides[d], d, buffer->itemsize));
    v.shape[static_cast<std::size_t>(d)] = buffer->shape[d];
    v.strides[static_cast<std::size_t>(d)] = buffer->strides[d] / buffer->itemsize;
  }
  v.owner = buffer;
  try {
    validate_view(v, arg);
  } catch (const InteropError& e) {
    raise_interop(e);
  }
}

}  // namespace

bool asks_for_host(py::handle dl_device) noexcept {
  PyObject* d = dl_device.ptr();
  if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(d, 0))) return false;
  int overflow = 0;
  const long type = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(d, 0), &overflow);
  if (type == -1 && PyErr_Occurred()) PyErr_Clear();
  return !overflow && type == kDLCPU;
}

py::object tensor_dlpack_to_host(const DeviceTensor& tensor, py::handle stream, py::handle max_version,
                                 py::handle dl_device, py::handle copy) {
  const char* arg = "Tensor.__dlpack__";
  PyObject* id = PyTuple_GET_ITEM(dl_device.ptr(), 1);  // asks_for_host: a 2-tuple
  if (PyLong_CheckExact(id)) {
    int overflow = 0;
    const long value = PyLong_AsLongAndOverflow(id, &overflow);
    if (value == -1 && PyErr_Occurred()) PyErr_Clear();
    if (overflow || value != 0)
      throw py::buffer_error(fmt::format("{}: dl_device=(1, {}) asks for another host than (1, 0); a host copy goes "
                                         "to (1, 0)",
                                         arg, py::str(id).cast<std::string>()));
  }
  // dl_device must be (kDLCPU, 0) (parse_dlpack_request checks its types); the rest as any request.
  const DlpackRequest r = parse_dlpack_request(stream, max_version, dl_device, copy, DLDevice{kDLCPU, 0}, arg);
  if (copy.ptr() == Py_False)
    throw py::buffer_error(fmt::format("{}: dl_device=(1, 0) asks for host memory but the tensor is on {} and "
                                       "copy=False; a host array needs a copy (copy=True or None)",
                                       arg, device_name(tensor.view().device)));
  // A host consumer has no stream: the copy follows the tensor's stream, or the stream given.
  const CUstream on = stream.is_none() || !r.consumer ? tensor.stream() : *r.consumer;
  ArrayView host;
  {
    py::gil_scoped_release nogil;
    host = copy_to_host(tensor, on);
  }
  return dlpack_capsule(host, r.versioned, DLPACK_FLAG_BITMASK_IS_COPIED);
}

py::object asarray(py::handle x, py::handle device_obj, py::handle stream_obj, py::handle allocator_obj) {
  const char* arg = "asarray(x)";
  const std::optional<DLDevice> device = parse_device(device_obj, "asarray(device)");
  if (device && device->device_type != kDLCUDA)
    throw py::value_error(fmt::format("asarray(device): a jitbridge.Tensor lives in CUDA memory; device must be None, "
                                      "an ordinal or 'cuda:N', not {}",
                                      device_name(*device)));
  // The stream is stored by the new Tensor (its allocation stream): parsed with its owner.
  const int ordinal = device ? device->device_id : current_device();
  const StreamRef s = parse_stream_ref(stream_obj, ordinal, "asarray(stream)").value_or(StreamRef(CU_STREAM_LEGACY));
  if (const TensorObject* t = tensor_object(x.ptr())) {
    if (!device || device->device_id == t->tensor.device()) return py::reinterpret_borrow<py::object>(x);
    throw py::value_error(fmt::format("{}: x is a jitbridge.Tensor on cuda:{} and device is cuda:{}; jitbridge does "
                                      "not copy across devices",
                                      arg, t->tensor.device(), device->device_id));
  }
  ArrayView v;
  if (!view_array(x.ptr(), s.handle, v, arg)) {
    if (!PyObject_CheckBuffer(x.ptr()))
      throw py::type_error(fmt::format("{}: a {} is not an array (expected a host array with __dlpack__ or the "
                                       "buffer protocol, such as a numpy.ndarray)",
                                       arg, Py_TYPE(x.ptr())->tp_name));
    view_buffer(x.ptr(), v, arg);
  }
  if (is_cuda(v.device))
    throw py::value_error(fmt::format("{}: x is in {} memory already; asarray uploads host arrays (kernels take "
                                      "device arrays as they are)",
                                      arg, device_name(v.device)));
  const std::shared_ptr<DeviceAllocator> allocator = allocator_argument(allocator_obj, "asarray(allocator)");
  TensorObject out;
  try {
    check_host_source(v);
    // Allocated with the GIL (a Python allocator's exceptions reach the caller as they are), copied without it.
    out.tensor = DeviceTensor::empty(v.shape, v.dtype, ordinal, s, allocator.get());
    py::gil_scoped_release nogil;
    upload(v, out.tensor, s);
  } catch (const InteropError& e) {
    raise_interop(InteropError(e.kind(), fmt::format("{}: {}", arg, e.what())));
  }
  return py::cast(std::move(out));
}

void bind_host_copy(py::module_& m) {
  m.def("asarray", &asarray, py::arg("x"), py::arg("device") = py::none(), py::arg("stream") = py::none(),
        py::kw_only(), py::arg("allocator") = py::none(),
        R"(A new jitbridge.Tensor holding a copy of the host array x (numpy.ndarray, anything with
__dlpack__ in host memory, or a buffer such as array.array; any strides).

device: None (the current CUDA device), an ordinal or 'cuda:N'. The memory is allocated and
the copy queued on `stream` (None: the legacy default stream), and the host waits for the copy
before returning, so x may change at once. A jitbridge.Tensor on that device comes back as it
is. allocator: as for empty(). ValueError for device arrays (kernels take them as they are) and host devices; TypeError for
objects that are not arrays or dtypes jitbridge does not know; NoDriverError without a driver.)");
}

}  // namespace jitbridge::python
