// launch_shortcut.cpp — the launch shortcut (launch_shortcut.hpp): learnt from a successful full-path
// launch, taken by later calls with the same argument types, declined (with no side effects) for
// anything the full path must decide.
#include "launch/launch_shortcut.hpp"

#include <cstring>

#include "interop/array_support.hpp"
#include "jitbridge/streams.hpp"
#include "launch/kernels.hpp"

namespace jitbridge::python {
namespace {

using Kind = ShortcutArg::Kind;

// Clears whatever Python error a declined step left, and declines.
bool decline() {
  if (PyErr_Occurred()) PyErr_Clear();
  return false;
}

bool same_shape(const LaunchConfig& a, const LaunchConfig& b) {
  auto same = [](const Dim3& x, const Dim3& y) { return x.x == y.x && x.y == y.y && x.z == y.z; };
  return same(a.grid, b.grid) && same(a.block, b.block) && same(a.cluster, b.cluster) &&
         a.shared_mem == b.shared_mem && a.cooperative == b.cooperative &&
         a.programmatic_dependent == b.programmatic_dependent;
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

// An array for a pointer parameter: device memory, on the launch's one device, of a dtype the
// pointee takes (pack_argument's rules; the arrays the shortcut reads are never read-only).
bool accept_array(const ShortcutArg& a, DLDevice where, DLDataType dtype, int& device) {
  if (!is_cuda(where)) return false;
  if (device < 0) device = where.device_id;
  else if (where.device_id != device) return false;
  return pointee_accepts(a.any_dtype, a.char_like, a.dtype, dtype);
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

bool launch_by_shortcut(const KernelObject& k, const LaunchConfig& config, PyObject* const* args, std::size_t n,
                        PyObject* stream_obj, bool check_args) {
  // A kernel usually has one shortcut: its argument types are then checked in the loop below
  // (a mismatch declines), not in a pass of their own.
  const LaunchShortcut* s = k.shortcuts.size() == 1 && k.shortcuts.front()->check_args == check_args
                                ? k.shortcuts.front().get()
                                : find(k, args, n, check_args);
  if (!s || !s->usable || s->args.size() != n) return false;
  alignas(16) unsigned char buffer[LaunchShortcut::kMaxBytes];  // the kernel's parameter space
  std::memset(buffer, 0, s->bytes);  // the padding between parameters passes as zeros, never stack garbage
  int device = -1;
  for (std::size_t i = 0; i < n; ++i) {
    const ShortcutArg& a = s->args[i];
    PyObject* obj = args[i];
    if (Py_TYPE(obj) != a.type) return decline();
    unsigned char* slot = buffer + a.offset;
    switch (a.kind) {
      case Kind::exchange_array: {
        DLTensor t;
        if (s->api->dltensor_from_py_object_no_sync(obj, &t) != 0) return decline();
        // A pointer parameter takes the address, device and dtype; the shape is the kernel's business.
        if (!t.data || !accept_array(a, t.device, t.dtype, device)) return decline();
        void* p = static_cast<char*>(t.data) + t.byte_offset;
        std::memcpy(slot, &p, sizeof p);
        break;
      }
      case Kind::cupy_array:
      case Kind::numba_array: {
        PointerFields f;
        const bool read = a.kind == Kind::cupy_array ? cupy_pointer_fields(obj, f) : numba_pointer_fields(obj, f);
        if (!read || !accept_array(a, {kDLCUDA, f.device}, f.dtype, device)) return decline();
        std::memcpy(slot, &f.ptr, sizeof f.ptr);
        break;
      }
      case Kind::null_pointer: {
        void* p = nullptr;
        std::memcpy(slot, &p, sizeof p);
        break;
      }
      case Kind::integer:
      case Kind::index_integer: {
        long long v = 0;
        if (!int64_argument(obj, v)) return decline();
        if (a.is_signed ? !signed_fits(v, a.size) : (v < 0 || !unsigned_fits(static_cast<std::uint64_t>(v), a.size)))
          return decline();
        std::memcpy(slot, &v, a.size);  // little-endian: the low bytes
        break;
      }
      case Kind::boolean: {
        const int truth = obj == Py_True ? 1 : obj == Py_False ? 0 : PyObject_IsTrue(obj);
        if (truth < 0) return decline();
        *slot = static_cast<unsigned char>(truth);
        break;
      }
      case Kind::buffer: {
        if (PyBytes_CheckExact(obj)) {
          if (static_cast<std::size_t>(PyBytes_GET_SIZE(obj)) != a.size) return decline();
          std::memcpy(slot, PyBytes_AS_STRING(obj), a.size);
          break;
        }
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) != 0) return decline();
        const bool fits = static_cast<std::size_t>(view.len) == a.size;
        if (fits) std::memcpy(slot, view.buf, a.size);
        PyBuffer_Release(&view);
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
        if (a.size == 8) {
          std::memcpy(slot, &x, 8);
        } else {
          if (!float32_fits(x)) return decline();
          const float f = static_cast<float>(x);
          std::memcpy(slot, &f, 4);
        }
        break;
      }
    }
  }
  if (device < 0) return false;  // no array: the full path picks the current device
  const Device& dev = Device::get(device);
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
  LaunchConfig c = config;
  const std::optional<CUstream> given =
      stream_obj && stream_obj != Py_None ? parse_stream(stream_obj, "stream") : std::nullopt;
  c.stream = given ? *given : framework ? *framework : CU_STREAM_LEGACY;
  if (framework && *framework != c.stream) stream_wait(device, c.stream, *framework);

  if (s->validated_device != &dev || !same_shape(s->validated_config, c)) validate_on(*s, *f, c, dev);
  launch(*f, c, dev, ParamBytes{buffer, s->bytes});
  ++s->launches;
  return true;
}

void learn_shortcut(const KernelObject& k, PyObject* const* args, std::size_t n, bool check_args) {
  const Signature* sig = k.launch->signature();
  if (!sig || !k.function || find(k, args, n, check_args) || k.shortcuts.size() >= 4) return;
  const std::vector<Param>& params = sig->params;
  const std::vector<ParamPlan>& plans = k.launch->plan(check_args);
  if (params.size() != n || plans.size() != n) return;
  auto s = std::make_unique<LaunchShortcut>();
  s->check_args = check_args;
  s->usable = n <= LaunchShortcut::kMaxArgs;
  const std::vector<std::size_t> offsets = param_offsets(*sig);
  const std::size_t used = n ? offsets.back() + params.back().size : 0;
  bool arrays = false;
  for (std::size_t i = 0; i < n; ++i) {
    ShortcutArg a;
    a.type = Py_TYPE(args[i]);
    const Param& p = params[i];
    const ParamPlan& plan = plans[i];
    bool ok = p.size <= LaunchShortcut::kMaxBytes && offsets[i] + p.size <= LaunchShortcut::kMaxBytes;
    a.offset = static_cast<std::uint16_t>(ok ? offsets[i] : 0);
    a.size = static_cast<std::uint16_t>(ok ? p.size : 0);
    const ScalarClass c = classify_scalar(args[i]);
    if (plan.kind == ParamPlan::Kind::pointer && args[i] == Py_None) {
      a.kind = Kind::null_pointer;
    } else if (plan.kind == ParamPlan::Kind::pointer) {
      const TypeAdapter& adapter = adapter_for(a.type);
      a.any_dtype = plan.any_dtype;
      a.char_like = plan.char_like;
      a.dtype = plan.dtype;
      ok = ok && (plan.any_dtype || plan.has_dtype);
      // Vector and struct pointees have count and alignment rules the shortcut does not read.
      ok = ok && (plan.any_dtype || (plan.lanes == 1 && !plan.has_alt_dtype && !plan.struct_items));
      // Arrays of an immutable producer (JAX) are read-only: only const pointees take them.
      ok = ok && (!adapter.immutable_producer || plan.pointee_const);
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
    } else if ((plan.kind == ParamPlan::Kind::scalar || plan.kind == ParamPlan::Kind::by_value) &&
               (c == ScalarClass::bytes || c == ScalarClass::buffer)) {
      a.kind = Kind::buffer;  // the full path copies the bytes of any scalar or struct parameter
    } else if (plan.kind == ParamPlan::Kind::scalar) {
      // What the full path would make of this type (classify_scalar), into what the parameter takes.
      using Scalar = ParamPlan::Scalar;
      if ((plan.scalar == Scalar::signed_int || plan.scalar == Scalar::unsigned_int) && c == ScalarClass::integer) {
        a.kind = a.type == &PyLong_Type ? Kind::integer : Kind::index_integer;
        a.is_signed = plan.scalar == Scalar::signed_int;
      } else if (plan.scalar == Scalar::boolean && c == ScalarClass::boolean) {
        a.kind = Kind::boolean;
      } else if (plan.scalar == Scalar::floating && (c == ScalarClass::floating || c == ScalarClass::integer)) {
        a.kind = Kind::floating;
        a.from_integer = c == ScalarClass::integer;
      } else {
        ok = false;
      }
    } else {
      ok = false;  // tensor views and structs by value take the full path
    }
    s->usable = s->usable && ok;
    s->args.push_back(a);
  }
  s->bytes = used;
  s->usable = s->usable && arrays && used <= LaunchShortcut::kMaxBytes;
  k.shortcuts.push_back(std::move(s));
}

}  // namespace jitbridge::python
