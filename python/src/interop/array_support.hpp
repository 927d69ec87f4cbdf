// array_support.hpp — internals shared by arrays.cpp, array_objects.cpp and framework_arrays.cpp: error helpers, the
// CAI field parsers, the per-call generation counter and the framework-specific fast readers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "interop/arrays.hpp"
#include "common/py_values.hpp"

namespace jitbridge::python {

// Interned attribute names and constant arguments of the array readers, made once with the GIL
// held and never freed (interned_names()).
struct InternedNames {
  PyObject* dlpack = PyUnicode_InternFromString("__dlpack__");
  PyObject* dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
  PyObject* cai = PyUnicode_InternFromString("__cuda_array_interface__");
  PyObject* exchange = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  PyObject* exchange_old = PyUnicode_InternFromString("__c_dlpack_exchange_api__");
  PyObject* module = PyUnicode_InternFromString("__module__");
  PyObject* qualname = PyUnicode_InternFromString("__qualname__");
  PyObject* shape = PyUnicode_InternFromString("shape");
  PyObject* typestr = PyUnicode_InternFromString("typestr");
  PyObject* descr = PyUnicode_InternFromString("descr");
  PyObject* data = PyUnicode_InternFromString("data");
  PyObject* version = PyUnicode_InternFromString("version");
  PyObject* strides = PyUnicode_InternFromString("strides");
  PyObject* mask = PyUnicode_InternFromString("mask");
  PyObject* stream = PyUnicode_InternFromString("stream");
  PyObject* ptr = PyUnicode_InternFromString("ptr");
  PyObject* cuda_stream = PyUnicode_InternFromString("cuda_stream");
  PyObject* cuda_stream_method = PyUnicode_InternFromString("__cuda_stream__");
  PyObject* device_id = PyUnicode_InternFromString("device_id");
  PyObject* dtype = PyUnicode_InternFromString("dtype");
  PyObject* str = PyUnicode_InternFromString("str");
  PyObject* device_ctypes_pointer = PyUnicode_InternFromString("device_ctypes_pointer");
  PyObject* value = PyUnicode_InternFromString("value");
  PyObject* gpu_data = PyUnicode_InternFromString("gpu_data");
  PyObject* kw_stream_max = Py_BuildValue("(ss)", "stream", "max_version");
  PyObject* kw_stream = Py_BuildValue("(s)", "stream");
  PyObject* max_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, 0);
};
const InternedNames& interned_names();

// Sets `type` with `message` and throws py::error_already_set.
[[noreturn]] void fail(PyObject* type, const std::string& message);
// The producer raised (its __dlpack__, its __cuda_array_interface__ property, its exchange-API
// function): the exception is the producer's and keeps its type. Exactly TypeError, ValueError,
// OverflowError, BufferError, RuntimeError, AttributeError, IndexError or NotImplementedError is
// re-raised as the same type with `arg: ` in front (the original becomes __cause__); other
// exceptions (the producer's own classes, KeyboardInterrupt) propagate as they are, an Exception
// with a note naming `arg` (Python 3.11+). A producer that failed without setting an error gets a
// BufferError. Always throws py::error_already_set.
[[noreturn]] void raise_producer_error(const char* arg);

// ---- __cuda_array_interface__ fields (cai_fields.cpp) ----------------------------------------------
// Each converts a value the caller holds a strong reference to; converting may run its __index__ or
// __bool__. Errors name "<arg>: <what>".
// An integer field: an int or anything with __index__, never a bool. TypeError / OverflowError;
// `index` >= 0 names the entry of a sequence.
std::int64_t int_item(PyObject* v, const char* arg, const char* what, std::ptrdiff_t index = -1);
// A tuple (or list: read from a copy) of at most kMaxNdim ints into `out`, named as
// "__cuda_array_interface__ <what>". TypeError / ValueError / OverflowError.
void int_sequence(PyObject* seq, Dims& out, const char* arg, const char* what);
// An address: an int in [0, 2**64). ValueError when negative, OverflowError above.
std::uintptr_t address_item(PyObject* v, const char* arg, const char* what);
// The device of CUDA memory known only by its address (0 with one GPU; else the driver says).
int cai_device(std::uintptr_t ptr, const char* arg);
// The fp8 dtype a CAI 'descr' of exactly [(name, "|V1")] names (cai_descr_name), else nullopt
// (`descr` may be nullptr). Reads exact lists, tuples and strs only: no Python code runs.
std::optional<DLDataType> fp8_of_descr(PyObject* descr);
// An array described by CAI fields (address, shape, byte strides or NULL for C order, dtype) into
// `view`, its device found from the address (cai_device); then, when it is not empty, `producer`
// ordered before `consumer`. Throws InteropError and ValueError naming `arg`.
void fill_cai_view(std::uintptr_t ptr, bool readonly, const std::int64_t* shape, std::size_t ndim,
                   const std::int64_t* strides_bytes, DLDataType dtype, CUstream producer, CUstream consumer,
                   ArrayView& view, const char* arg);
// A __cuda_array_interface__ dict (v0 to v3) into `view` for work on `consumer` (its "stream", if
// any, ordered before it). Every field is taken as a strong reference before any is converted, so
// a field whose conversion changes the dict is harmless. Throws TypeError / ValueError /
// OverflowError / BufferError naming `arg`, InteropError (view_array translates it), and
// NoDriverError / DriverError when the stream handshake needs the driver and it fails.
void view_cai_dict(PyObject* iface, CUstream consumer, ArrayView& view, const char* arg);

// Incremented by every consumer_stream() call: memos keyed by it live for one launch / as_array.
std::uint64_t call_generation() noexcept;
// Drops the memo of the first array's DLTensor (consumer_stream() keeps it for the view that
// follows), so a benchmark loop over one array measures a full view each time.
void forget_first_tensor() noexcept;

// Reads the fields a cupy.ndarray (Protocol::cupy_fields) or a numba DeviceNDArray
// (Protocol::numba_fields) would put in its __cuda_array_interface__ straight from its attributes,
// then orders the producer's stream before `consumer` as the CAI path would (CuPy: its current
// stream; Numba: the array's bound stream). Throws what the attribute reads raise
// (py::error_already_set) and py::type_error / py::value_error for bad fields.
void view_framework_fields(PyObject* obj, Protocol protocol, CUstream consumer, ArrayView& view, const char* arg);

// Whether `type` is exactly cupy.ndarray / numba.cuda's DeviceNDArray (by module and name).
bool is_cupy_ndarray(PyTypeObject* type);
bool is_numba_device_array(PyTypeObject* type);

// CuPy's current stream on `device_id` (< 0: the current device), normalized; asked once per
// call_generation() and device. nullopt when cupy is not imported. Throws what CuPy raises.
std::optional<CUstream> cupy_stream(int device_id);
// The same, asked now (no memo): through CuPy's exported C function when this CuPy has it (see
// cupy_stream_reader), else through cupy.cuda.get_current_stream(device_id).
std::optional<CUstream> cupy_current_stream(int device_id);
// cupy.cuda.get_current_stream(device_id): CuPy's Stream object (null when cupy is not imported).
// Throws what CuPy raises.
py::object cupy_current_stream_object(int device_id);
// Which of the two cupy_current_stream uses (its name), for tests.
const char* cupy_stream_reader();

// The device a CuPy array's memory is on (data.device_id); -1 when it cannot be read.
int cupy_array_device(PyObject* obj) noexcept;

// What a pointer parameter needs of an array: its address, device and dtype.
struct PointerFields {
  std::uintptr_t ptr = 0;
  int device = 0;
  DLDataType dtype{};
};
// The pointer fields of a cupy.ndarray / numba DeviceNDArray whose type the full reader has
// verified, without shape and strides. False, with no Python error set, for anything unusual: a
// NULL pointer, a dtype object not seen before, a Numba array bound to a stream, an attribute that
// fails. The caller then takes the full path, which decides (and words any error).
bool cupy_pointer_fields(PyObject* obj, PointerFields& out) noexcept;
bool numba_pointer_fields(PyObject* obj, PointerFields& out) noexcept;

}  // namespace jitbridge::python
