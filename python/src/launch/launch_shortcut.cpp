// launch_shortcut.cpp — the launch shortcut (launch_shortcut.hpp): learnt from a successful full-path
// launch, taken by later calls with the same argument types, declined (with no side effects) for
// anything the full path must decide.
#include "launch/launch_shortcut.hpp"

#include <cstring>

#include "interop/array_support.hpp"
#include "jitbridge/streams.hpp"
#include "launch/kernels.hpp"

namespace jitbridge::python {

// A shortcut launch passes kernelParams (a stack array of ParamBytes), never the buffer form.
static_assert(LaunchShortcut::kMaxArgs <= kMaxParamPointers);

namespace {

using Kind = ShortcutArg::Kind;

// Clears whatever Python error a declined step left, and declines.
bool decline() {
  if (PyErr_Occurred()) PyErr_Clear();
  return false;
}

const LaunchShortcut* find(const KernelObject& k, PyObject* const* args, std::size_t n, bool check_args) {
  for (const std::unique_ptr<LaunchShortcut>& s : k.shortcuts) {
    if (s->args.size() != n || s->check_args != check_args) continue;
    std::size_t i = 0;
    while (i < n && Py_TYPE(args[i]) == s->args[i].type) ++i;
    if (i == n) return s.get();
  }
  return nullptr;
}

// The function `k` resolved on device `ordinal` (KernelObject::resolved), or nullptr if none yet.
const Function* function_on(const KernelObject& k, int ordinal) {
  const ResolvedKernel* r = k.launch->resolved_on(ordinal);
  return r ? r->function.get() : nullptr;
}

// `c` on `dev` differs from the last configuration validated: validate_launch runs unless `c` is the
// last one validated on this device (launches alternating between devices). Throws LaunchConfigError.
void validate_on(const LaunchShortcut& s, const Function& f, const LaunchConfig& c, const Device& dev) {
  const std::size_t i = static_cast<std::size_t>(dev.ordinal());
  if (i >= s.validated_on.size()) s.validated_on.resize(i + 1);
  LaunchShortcut::Validated& on = s.validated_on[i];
  // The memos keep the configuration's shape only (same_shape): no stream handle is stored.
  LaunchConfig shape = c;
  shape.stream = CU_STREAM_LEGACY;
  if (on.device != &dev || !same_shape(on.config, shape)) {
    validate_launch(f, c, dev);
    on = {&dev, shape};
  }
  s.validated_config = shape;
  s.validated_device = &dev;
}

}  // namespace

bool launch_by_shortcut(const KernelObject& k, LaunchConfig& config, PyObject* const* args, std::size_t n,
                        PyObject* stream_obj, bool check_args) {
  // A kernel usually has one shortcut: its argument types are then checked in the loop below
  // (a mismatch declines), not in a pass of their own.
  const LaunchShortcut* s = k.shortcuts.size() == 1 && k.shortcuts.front()->check_args == check_args
                                ? k.shortcuts.front().get()
                                : find(k, args, n, check_args);
  if (!s || !s->usable || s->args.size() != n) return false;
  alignas(16) unsigned char buffer[LaunchShortcut::kMaxBytes];  // the kernel's parameter space
  void* params[LaunchShortcut::kMaxArgs];  // the driver's kernelParams: parameter i at its offset in `buffer`
  // The padding between parameters passes as zeros, never stack garbage (each accepted parameter is written whole).
  if (s->padded) std::memset(buffer, 0, s->bytes);
  int device = -1;
  for (std::size_t i = 0; i < n; ++i) {
    const ShortcutArg& a = s->args[i];
    PyObject* obj = args[i];
    if (Py_TYPE(obj) != a.type) return decline();
    const FastParam& p = a.param;
    params[i] = buffer + p.offset;
    switch (a.kind) {
      case Kind::exchange_array: {
        DLTensor t;
        if (s->api->dltensor_from_py_object_no_sync(obj, &t) != 0) return decline();
        // A pointer parameter takes the address, device and dtype; the shape is the kernel's business.
        if (!t.data || !accept_pointer(p, static_cast<char*>(t.data) + t.byte_offset, t.device, t.dtype, device, buffer))
          return decline();
        break;
      }
      case Kind::cupy_array:
      case Kind::numba_array: {
        PointerFields f;
        const bool read = a.kind == Kind::cupy_array ? cupy_pointer_fields(obj, f) : numba_pointer_fields(obj, f);
        if (!read || !accept_pointer(p, reinterpret_cast<void*>(f.ptr), {kDLCUDA, f.device}, f.dtype, device, buffer))
          return decline();
        break;
      }
      case Kind::null_pointer:
        accept_null(p, buffer);
        break;
      case Kind::integer:
      case Kind::index_integer: {
        long long v = 0;
        if (!int64_argument(obj, v) || !accept_integer(p, v, buffer)) return decline();
        break;
      }
      case Kind::boolean: {
        const int truth = obj == Py_True ? 1 : obj == Py_False ? 0 : PyObject_IsTrue(obj);
        if (truth < 0) return decline();
        accept_boolean(p, truth != 0, buffer);
        break;
      }
      case Kind::buffer: {
        if (PyBytes_CheckExact(obj)) {
          if (!accept_bytes(p, PyBytes_AS_STRING(obj), static_cast<std::size_t>(PyBytes_GET_SIZE(obj)), buffer))
            return decline();
          break;
        }
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) != 0) return decline();
        const bool fits = accept_bytes(p, view.buf, static_cast<std::size_t>(view.len), buffer);
        PyBuffer_Release(&view);
        if (!fits) return decline();
        break;
      }
      case Kind::numpy_scalar: {
        if (a.numpy.kind == NumpyScalar::Kind::floating) {
          if (!accept_floating(p, numpy_float_value(obj, a.numpy), buffer)) return decline();
          break;
        }
        long long v = 0;
        if (!numpy_int64_value(obj, a.numpy, v)) return decline();  // a uint64 past int64: the full path
        const bool fits = a.from_integer ? accept_floating(p, static_cast<double>(v), buffer)
                                         : accept_integer(p, v, buffer);
        if (!fits) return decline();
        break;
      }
      case Kind::floating: {
        double x;
        if (a.from_integer) {
          long long v = 0;
          if (!int64_argument(obj, v)) return decline();
          x = static_cast<double>(v);
        } else {
          x = PyFloat_CheckExact(obj) ? PyFloat_AS_DOUBLE(obj) : PyFloat_AsDouble(obj);
          if (x == -1.0 && PyErr_Occurred()) return decline();
        }
        if (!accept_floating(p, x, buffer)) return decline();
        break;
      }
    }
  }
  if (device < 0) return false;  // no array: the full path picks the current device
  // The last launch's device when it is this one (Device::get's object for the ordinal: one per device), else asked.
  const Device& dev =
      k.checked_device && k.checked_device->ordinal() == device ? *k.checked_device : Device::get(device);
  // The kernel on this device: the last launch's (one compare), else the one a full-path launch
  // resolved there (its binary's arch checked then); a device not launched on yet declines.
  const Function* f = k.function;
  if (k.checked_device != &dev) {
    f = function_on(k, device);
    if (!f) return false;
  }

  // The consumer-stream rule: stream= if given, else the framework's current stream on the
  // arrays' device (CuPy, exchange API), else the legacy stream. A framework stream that is not
  // the consumer is waited for once (the arrays all come from it).
  std::optional<CUstream> framework;
  const Kind family = s->args[s->array_index].kind;
  if (family == Kind::exchange_array) {
    void* stream = nullptr;
    if (s->api->current_work_stream(kDLCUDA, device, &stream) != 0) return decline();
    framework = normalize_stream(static_cast<CUstream>(stream));
  } else if (family == Kind::cupy_array) {
    try {
      framework = cupy_current_stream(device);
    } catch (const py::error_already_set&) {
      return decline();
    }
  }
  const std::optional<CUstream> given =
      stream_obj && stream_obj != Py_None ? parse_stream(stream_obj, "stream") : std::nullopt;
  LaunchConfig& c = config;  // from here on the shortcut launches (or throws what the full path would)
  c.stream = given ? *given : framework ? *framework : CU_STREAM_LEGACY;
  if (framework && *framework != c.stream) stream_wait(device, c.stream, *framework);

  if (s->validated_device != &dev || !same_shape(s->validated_config, c)) validate_on(*s, *f, c, dev);
  // The kernelParams form (params, filled while packing: one per parameter, n >= 1 as the shortcut has an array).
  launch(*f, c, dev, params);
  ++s->launches;
  return true;
}

void learn_shortcut(const KernelObject& k, PyObject* const* args, std::size_t n, bool check_args) {
  const Signature* sig = k.launch->signature();
  if (!sig || !k.function || find(k, args, n, check_args) || k.shortcuts.size() >= LaunchShortcut::kMaxPerKernel) return;
  const std::vector<FastParam>& params = k.launch->fast(check_args);
  const ParamLayout* layout = k.launch->layout();
  if (!layout || params.size() != n) return;
  auto s = std::make_unique<LaunchShortcut>();
  s->check_args = check_args;
  s->usable = n <= LaunchShortcut::kMaxArgs;
  bool arrays = false;
  for (std::size_t i = 0; i < n; ++i) {
    ShortcutArg a;
    a.type = Py_TYPE(args[i]);
    a.param = params[i];
    const FastParam& p = a.param;
    using FK = FastParam::Kind;
    bool ok = p.kind != FK::none;
    const ScalarClass c = classify_scalar(args[i]);
    if (p.kind == FK::pointer && args[i] == Py_None) {
      a.kind = Kind::null_pointer;
    } else if (p.kind == FK::pointer) {
      const TypeAdapter& adapter = adapter_for(a.type);
      // The array rule's parameter half, decided here once (launches take its array half, accept_pointer): arrays of
      // an immutable producer (JAX) are read-only by their type.
      ok = ok && takes_array(p, adapter.immutable_producer != nullptr);
      if (adapter.protocol == Protocol::exchange_api && adapter.api->dltensor_from_py_object_no_sync) {
        a.kind = Kind::exchange_array;
        ok = ok && (!s->api || s->api == adapter.api);
        s->api = adapter.api;
      } else if (adapter.protocol == Protocol::cupy_fields && adapter.verified) {
        a.kind = Kind::cupy_array;
      } else if (adapter.protocol == Protocol::numba_fields && adapter.verified) {
        a.kind = Kind::numba_array;
      } else {
        ok = false;
      }
      // One framework per shortcut: its stream is the one every array was made on.
      if (ok && arrays) ok = s->args[s->array_index].kind == a.kind;
      if (ok && !arrays) {
        arrays = true;
        s->array_index = i;
      }
    } else if (p.kind != FK::none && (c == ScalarClass::bytes || c == ScalarClass::buffer)) {
      a.kind = Kind::buffer;  // the full path copies the bytes of any scalar or struct parameter
    } else if (p.kind == FK::integer && c == ScalarClass::integer) {
      // What the full path would make of this type (classify_scalar), into what the parameter takes.
      a.numpy = numpy_scalar(a.type);
      const bool numpy_integer = a.numpy.kind == NumpyScalar::Kind::signed_integer ||
                                 a.numpy.kind == NumpyScalar::Kind::unsigned_integer;
      a.kind = a.type == &PyLong_Type ? Kind::integer : numpy_integer ? Kind::numpy_scalar : Kind::index_integer;
    } else if (p.kind == FK::boolean && c == ScalarClass::boolean) {
      a.kind = Kind::boolean;
    } else if (p.kind == FK::floating && (c == ScalarClass::floating || c == ScalarClass::integer)) {
      a.from_integer = c == ScalarClass::integer;
      a.numpy = numpy_scalar(a.type);
      const bool numpy_ok = a.numpy.kind != NumpyScalar::Kind::none &&
                            (a.numpy.kind == NumpyScalar::Kind::floating) == !a.from_integer;
      a.kind = numpy_ok ? Kind::numpy_scalar : Kind::floating;
    } else {
      ok = false;  // tensor views, half/bfloat16/complex values and structs by value take the full path
    }
    s->usable = s->usable && ok;
    s->args.push_back(a);
  }
  s->bytes = layout->bytes;
  s->padded = layout->padded;
  s->usable = s->usable && arrays && s->bytes <= LaunchShortcut::kMaxBytes;
  k.shortcuts.push_back(std::move(s));
}

}  // namespace jitbridge::python
