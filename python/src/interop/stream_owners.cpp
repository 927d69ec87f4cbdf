// stream_owners.cpp — the owner of a stream handle about to be stored: the stream object given, the jitbridge object it came from, CuPy's current stream, or none (immortal or unowned).
#include "interop/stream_owners.hpp"

#include "common/py_keepalive.hpp"
#include "interop/array_support.hpp"
#include "interop/interop_objects.hpp"

namespace jitbridge::python {
namespace {

bool immortal(CUstream h) { return h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD; }

// Where the consumer stream of the last consumer_stream() call on this thread came from. The
// pointers are borrowed from that call's arguments; they are read only while call_generation()
// is still that call's (a nested call bumps it: the outer call renotes it, else falls back to the
// lookup).
thread_local ConsumerSource noted_source;

// CuPy's current stream object on `device` when its .ptr is `handle`.
py::object cupy_owner(CUstream handle, int device) {
  try {
    py::object s = cupy_current_stream_object(device);
    if (!s) return s;
    py::object ptr = s.attr("ptr");
    if (PyLong_Check(ptr.ptr()) && stream_from_int(PyLong_AsUnsignedLongLong(ptr.ptr())) == handle) return s;
    if (PyErr_Occurred()) PyErr_Clear();
  } catch (py::error_already_set&) {
  }
  return py::object();
}

}  // namespace

StreamRef owned_stream(CUstream handle, int device) {
  handle = normalize_stream(handle);
  if (immortal(handle)) return StreamRef(handle);
  if (device < 0) device = current_device();
  if (py::object s = cupy_owner(handle, device)) return StreamRef(handle, python_keepalive(s.ptr()));
  // torch's current stream needs no keepalive (its streams are pooled, never destroyed), and
  // anything else is unowned (the user's to keep alive): both are stored without one, so torch is
  // not asked.
  return StreamRef(handle);
}

std::optional<StreamRef> parse_stream_ref(py::handle stream, int device, const char* arg) {
  const std::optional<CUstream> handle = parse_stream(stream, arg);
  if (!handle) return std::nullopt;
  if (immortal(*handle)) return StreamRef(*handle);
  if (PyLong_Check(stream.ptr())) return owned_stream(*handle, device);
  return StreamRef(*handle, python_keepalive(stream.ptr()));
}

void note_consumer_source(CUstream handle, PyObject* explicit_obj, PyObject* array) noexcept {
  noted_source = {call_generation(), normalize_stream(handle),
                  explicit_obj && !PyLong_Check(explicit_obj) ? explicit_obj : nullptr, array};
}

ConsumerSource consumer_source() noexcept { return noted_source; }

void renote_consumer_source(const ConsumerSource& source) noexcept {
  noted_source = source;
  noted_source.generation = call_generation();
}

StreamRef consumer_stream_ref(CUstream handle, int device) {
  handle = normalize_stream(handle);
  if (immortal(handle)) return StreamRef(handle);
  const ConsumerSource& src = noted_source;
  if (src.generation == call_generation() && src.handle == handle) {
    if (src.explicit_obj) return StreamRef(handle, python_keepalive(src.explicit_obj));
    if (src.array) {
      if (TensorObject* t = tensor_object(src.array)) {
        StreamRef r = t->tensor.buffer()->stream_ref();
        if (r.handle == handle) return r;
      } else if (ArrayViewObject* v = array_view_object(src.array)) {
        if (v->stream.handle == handle) return v->stream;
      }
    }
  }
  return owned_stream(handle, device);
}

}  // namespace jitbridge::python
