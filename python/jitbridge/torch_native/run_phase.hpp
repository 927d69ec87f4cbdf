// run_phase.hpp — the torch add-on's per-call work: one phase of a parsed declaration (plan.hpp) run on a call's
// arguments (checks, rules, outputs, launches). Included by addon.cpp only (the add-on is one translation unit).
#ifndef JITBRIDGE_TORCH_NATIVE_RUN_PHASE_HPP
#define JITBRIDGE_TORCH_NATIVE_RUN_PHASE_HPP

#include <ATen/ops/empty.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/SmallVector.h>

#include <cstring>
#include <sstream>
#include <string>

#include "plan.hpp"

namespace {

// Per call, on the stack for phases of up to kInline slots (no heap allocation for the slot arrays).
constexpr unsigned kInline = 12;

struct Slots : jtn::Env {
  const Phase& phase;
  c10::SmallVector<at::Tensor, kInline> tensors;
  c10::SmallVector<jtn::Value, kInline> scalars;
  explicit Slots(const Phase& p) : phase(p), tensors(static_cast<size_t>(p.n_slots)),
                                   scalars(static_cast<size_t>(p.n_slots)) {}
  const at::Tensor& tensor(int slot) const {
    if (slot < 0 || static_cast<size_t>(slot) >= tensors.size() || !tensors[static_cast<size_t>(slot)].defined())
      throw std::invalid_argument("slot " + std::to_string(slot) + " holds no tensor yet");
    return tensors[static_cast<size_t>(slot)];
  }
  int64_t size(int slot, int64_t dim) const override {
    const at::Tensor& t = tensor(slot);
    int64_t n = t.dim();
    int64_t d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n)
      throw std::invalid_argument("dimension " + std::to_string(dim) + " of a tensor of rank " + std::to_string(n));
    return t.size(d);
  }
  int64_t numel(int slot) const override { return tensor(slot).numel(); }
  int64_t rank(int slot) const override { return tensor(slot).dim(); }
  jtn::Value scalar(int slot) const override {
    if (slot < 0 || static_cast<size_t>(slot) >= scalars.size())
      throw std::invalid_argument("slot " + std::to_string(slot) + " is no scalar");
    return scalars[static_cast<size_t>(slot)];
  }
};

jtn::Value evaluate(const Phase& p, const jtn::Expr& e, const Slots& s, const char* what) {
  try {
    return jtn::eval(e, s);
  } catch (const std::exception& ex) {
    TORCH_CHECK_VALUE(false, p.op, ": ", p.title, ": ", what, " (", e.text, "): ", ex.what());
  }
}

// The integer `v` that `e` gave; a ValueError for a float.
int64_t integer_of(const Phase& p, const jtn::Expr& e, jtn::Value v, const char* what) {
  TORCH_CHECK_VALUE(!v.is_float, p.op, ": ", p.title, ": ", what, " (", e.text, ") gave a float, not an integer");
  return v.i;
}

[[noreturn]] void launch_failed(const Phase& p, int code) {
  const char* message = nullptr;
  int cuda = 0;
  g_api->last_error(&message, &cuda);
  std::string text = p.op + ": " + p.title + ": " + (message ? message : "launch failed");
  if (code == JITBRIDGE_ERROR_TYPE) TORCH_CHECK_TYPE(false, text);
  if (code == JITBRIDGE_ERROR_VALUE || code == JITBRIDGE_ERROR_OVERFLOW) TORCH_CHECK_VALUE(false, text);
  TORCH_CHECK(false, text);
}

// An argument's name for messages.
std::string arg_name(const Phase& p, size_t i) {
  return i < p.names.size() ? p.names[i] : "argument " + std::to_string(i);
}

std::string dtype_text(at::ScalarType t) {
  const char* n = name_of_dtype(t);
  return n ? n : std::string(c10::toString(t));
}

// The returned outputs of a phase (inline for up to 4: no heap allocation per call).
using Results = c10::SmallVector<at::Tensor, 4>;

// Runs `p` on the arguments args[0..n): checks, allocations (torch's caching allocator on the inputs' device),
// launches on torch's current stream of that device. Returns the returned outputs. Throws c10 errors (ValueError,
// TypeError, RuntimeError in Python) before any launch for bad inputs.
Results run_phase(const Phase& p, c10::ArrayRef<c10::IValue> args) {
  TORCH_CHECK(args.size() == p.kinds.size(), p.op, ": ", p.title, " takes ", p.kinds.size(), " arguments, got ",
              args.size());
  Slots s(p);
  MemoKey key;
  int first = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    char k = p.kinds[i];
    if (k == 'T') {
      TORCH_CHECK_TYPE(args[i].isTensor(), p.op, ": ", arg_name(p, i), " must be a tensor");
      const at::Tensor& t = args[i].toTensor();
      TORCH_CHECK_VALUE(t.defined(), p.op, ": ", arg_name(p, i), " is an undefined tensor");
      if (!p.trusted) {
        TORCH_CHECK_VALUE(t.is_cuda(), p.op, ": ", arg_name(p, i), " is a ",
                          c10::DeviceTypeName(t.device().type(), true),
                          " tensor; this op's kernels run on CUDA tensors");
        if (first >= 0)
          TORCH_CHECK_VALUE(t.device() == s.tensors[static_cast<size_t>(first)].device(), p.op, ": ", arg_name(p, i),
                            " is on ", t.device(), " but ", arg_name(p, static_cast<size_t>(first)), " is on ",
                            s.tensors[static_cast<size_t>(first)].device(), "; all tensors must be on one device");
      }
      if (first < 0) first = static_cast<int>(i);
      s.tensors[i] = t;
      key.push_back(t.dim());
      key.append(t.sizes().begin(), t.sizes().end());
    } else if (k == 'f') {
      s.scalars[i] = jtn::Value::real(args[i].toDouble());
      int64_t bits = 0;
      std::memcpy(&bits, &s.scalars[i].f, sizeof bits);
      key.push_back(bits);
    } else {
      s.scalars[i] = jtn::Value::integer(k == 'i' ? args[i].toInt() : args[i].toBool() ? 1 : 0);
      key.push_back(s.scalars[i].i);
    }
  }
  const at::Tensor& lead = s.tensor(p.dispatch);
  const size_t dtype = static_cast<size_t>(lead.scalar_type());
  TORCH_CHECK(dtype < kDtypes, p.op, ": ", p.title, ": unknown dtype ", lead.scalar_type());
  if (!p.trusted) {
    TORCH_CHECK_TYPE(p.allowed_for[dtype], p.op, ": ", arg_name(p, static_cast<size_t>(p.dispatch)), " has dtype ",
                     dtype_text(lead.scalar_type()), "; the kernels are declared for ", p.allowed_text);
    for (const auto& [slot, want] : p.require_for[dtype]) {
      const at::Tensor& t = s.tensor(slot);
      TORCH_CHECK_TYPE(t.scalar_type() == want, p.op, ": ", arg_name(p, static_cast<size_t>(slot)), " has dtype ",
                       dtype_text(t.scalar_type()), ", expected ", dtype_text(want), " (with ",
                       arg_name(p, static_cast<size_t>(p.dispatch)), " of dtype ", dtype_key(lead.scalar_type()),
                       ")");
    }
  }
  // The rules' values: replayed from the phase's memo when this call's key equals the last successful call's (the
  // checks passed for it), else evaluated in the same order and stored once the call has launched.
  key.push_back(lead.is_cuda() ? 1 : 0);
  MemoValues values;
  const bool replay = p.memo.find(key, values);
  size_t next = 0;
  auto value = [&](const jtn::Expr& e, const char* what) -> jtn::Value {
    if (replay) {
      TORCH_INTERNAL_ASSERT(next < values.size(), p.op, ": ", p.title, ": the memo holds fewer values than the rules");
      return values[next++];
    }
    values.push_back(evaluate(p, e, s, what));
    return values.back();
  };
  auto value_int = [&](const jtn::Expr& e, const char* what) { return integer_of(p, e, value(e, what), what); };
  if (!replay) for (const auto& c : p.checks) {
    bool ok = false;
    try {
      jtn::Value v = jtn::eval(c.condition, s);
      ok = v.is_float ? v.f != 0.0 : v.i != 0;
    } catch (const std::invalid_argument&) {  // a dimension the tensor does not have: the check fails
    }
    if (!ok) {
      std::ostringstream got;
      for (size_t j = 0; j < c.shown.size(); ++j) {
        size_t slot = static_cast<size_t>(c.shown[j]);
        got << (j ? ", " : "") << (slot < p.names.size() ? p.names[slot] : "?") << " " << s.tensor(c.shown[j]).sizes();
      }
      TORCH_CHECK_VALUE(false, p.op, ": ", c.message, "; got ", got.str());
    }
  }
  if (p.contiguous)
    for (auto& t : s.tensors)
      if (t.defined() && !t.is_contiguous()) t = t.contiguous();
  const c10::Device device = lead.device();
  Results results;
  for (const auto& r : p.outs) {
    const at::ScalarType out_dtype = r.dtype_slot >= 0 ? s.tensor(r.dtype_slot).scalar_type() : r.dtype_fixed;
    c10::SmallVector<int64_t, 6> shape;
    if (r.like >= 0) {
      auto sizes = s.tensor(r.like).sizes();
      shape.assign(sizes.begin(), sizes.end());
    } else {
      for (const auto& d : r.dims) {
        int64_t v = value_int(d, "an output shape");
        TORCH_CHECK_VALUE(v >= 0, p.op, ": ", p.title, ": an output shape (", d.text, ") gave ", v);
        shape.push_back(v);
      }
    }
    at::Tensor out = at::empty(shape, at::TensorOptions().dtype(out_dtype).device(device));
    s.tensors[static_cast<size_t>(r.slot)] = out;
    if (r.returned) results.push_back(out);
  }
  if (lead.is_cuda() && !p.launches.empty()) {
    c10::Stream stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device);
    auto* cu_stream = static_cast<CUstream_st*>(stream.native_handle());
    c10::SmallVector<jitbridge_arg, kInline> packed;
    for (const auto& l : p.launches) {
      uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
      bool empty = false;
      for (size_t d = 0; d < l.grid.size(); ++d) {
        int64_t v = value_int(l.grid[d], "grid");
        TORCH_CHECK_VALUE(v >= 0 && v <= UINT32_MAX, p.op, ": ", p.title, ": grid (", l.grid[d].text, ") gave ", v);
        grid[d] = static_cast<uint32_t>(v);
        empty = empty || v == 0;
      }
      if (empty) continue;  // a grid with a zero dimension launches nothing
      for (size_t d = 0; d < l.block.size(); ++d) {
        int64_t v = value_int(l.block[d], "block");
        TORCH_CHECK_VALUE(v >= 1 && v <= UINT32_MAX, p.op, ": ", p.title, ": block (", l.block[d].text, ") gave ",
                          v);
        block[d] = static_cast<uint32_t>(v);
      }
      jitbridge_kernel* kernel = l.kernel_for[dtype];
      TORCH_CHECK_TYPE(kernel != nullptr, p.op, ": ", p.title, ": no kernel for dtype ", lead.scalar_type());
      jitbridge_function* fn = nullptr;
      int rc = g_api->kernel_resolve(kernel, device.index(), &fn);
      if (rc != JITBRIDGE_OK) launch_failed(p, rc);
      packed.assign(l.args.size(), jitbridge_arg{});
      for (size_t a = 0; a < l.args.size(); ++a) {
        jitbridge_arg& out = packed[a];
        const LaunchArg& in = l.args[a];
        if (in.slot >= 0) {
          const at::Tensor& t = s.tensor(in.slot);
          out.kind = JITBRIDGE_ARG_ARRAY;
          out.array.data = t.data_ptr();
          out.array.device_type = 2;
          out.array.device_id = t.get_device();
          TORCH_CHECK_TYPE(dlpack_dtype(t.scalar_type(), &out.array.dtype_code, &out.array.dtype_bits), p.op,
                           ": argument ", in.slot, " has dtype ", t.scalar_type(), ", which jitbridge does not take");
          out.array.dtype_lanes = 1;
          out.array.ndim = static_cast<int32_t>(t.dim());
          out.array.shape = t.sizes().data();
          out.array.strides = t.strides().data();
        } else {
          jtn::Value v = value(in.expr, "a launch argument");
          if (v.is_float) {
            out.kind = JITBRIDGE_ARG_FLOAT;
            out.f = v.f;
          } else {
            out.kind = in.boolean ? JITBRIDGE_ARG_BOOL : JITBRIDGE_ARG_INT;
            out.i = v.i;
          }
        }
      }
      jitbridge_launch_config config{};
      config.struct_size = sizeof config;
      std::memcpy(config.grid, grid, sizeof grid);
      std::memcpy(config.block, block, sizeof block);
      if (l.has_shared) {
        int64_t v = value_int(l.shared, "shared_mem");
        TORCH_CHECK_VALUE(v >= 0, p.op, ": ", p.title, ": shared_mem (", l.shared.text, ") gave ", v);
        config.shared_mem = static_cast<size_t>(v);
      }
      config.stream = cu_stream;
      rc = g_api->launch(fn, &config, packed.data(), packed.size(), 0);
      if (rc != JITBRIDGE_OK) launch_failed(p, rc);
    }
  }
  if (!replay) p.memo.store(key, values);
  return results;
}

}  // namespace

#endif
