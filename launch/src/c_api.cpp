// c_api.cpp — the C interface (jitbridge/c_api.h) over the typed C++ launch path: kernel handles, signature reads,
// checked launches and stream-ordered allocations, every C++ exception turned into a code and a per-thread message.
#include "jitbridge/c_api.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "jitbridge/cuda_search.hpp"
#include "jitbridge/device_allocator.hpp"
#include "jitbridge/kernel_plan.hpp"
#include "jitbridge/launch.hpp"

#ifndef JITBRIDGE_VERSION
#define JITBRIDGE_VERSION "unknown"
#endif

// A kernel handle: a reference count over the kernel's launch plan (shared with a RawKernel for kernel_from_python).
// A jitbridge_function is the plan's ResolvedKernel for one device (as_function/resolved_of convert).
struct jitbridge_kernel {
  std::atomic<long> refs{1};
  std::shared_ptr<const jitbridge::KernelPlan> plan;
};

namespace jitbridge::c_api {
namespace {

// jitbridge_function is never defined: its pointers are the plan's ResolvedKernel entries.
jitbridge_function* as_function(const ResolvedKernel& r) {
  return reinterpret_cast<jitbridge_function*>(const_cast<ResolvedKernel*>(&r));
}
const ResolvedKernel& resolved_of(const jitbridge_function* f) { return *reinterpret_cast<const ResolvedKernel*>(f); }

struct LastError {
  int code = JITBRIDGE_OK;
  int cuda_result = 0;
  std::string message;
};
thread_local LastError t_error;

int from_argument(ArgumentError::Kind kind) {
  switch (kind) {
    case ArgumentError::Kind::type: return JITBRIDGE_ERROR_TYPE;
    case ArgumentError::Kind::overflow: return JITBRIDGE_ERROR_OVERFLOW;
    case ArgumentError::Kind::value: break;
  }
  return JITBRIDGE_ERROR_VALUE;
}

int from_interop(InteropError::Kind kind) {
  switch (kind) {
    case InteropError::Kind::type: return JITBRIDGE_ERROR_TYPE;
    case InteropError::Kind::overflow: return JITBRIDGE_ERROR_OVERFLOW;
    default: break;
  }
  return JITBRIDGE_ERROR_VALUE;
}

// The code and message of the exception being handled (call inside a catch block only).
int current_error() noexcept {
  try {
    throw;
  } catch (const ArgumentError& e) {
    return set_error(from_argument(e.kind()), e.what());
  } catch (const InteropError& e) {
    return set_error(from_interop(e.kind()), e.what());
  } catch (const LaunchConfigError& e) {
    return set_error(JITBRIDGE_ERROR_LAUNCH_CONFIG, e.what());
  } catch (const LaunchError& e) {
    return set_error(JITBRIDGE_ERROR_LAUNCH, e.what(), static_cast<int>(e.code()));
  } catch (const DriverError& e) {
    return set_error(JITBRIDGE_ERROR_DRIVER, e.what(), static_cast<int>(e.code()));
  } catch (const NoDriverError& e) {
    return set_error(JITBRIDGE_ERROR_NO_DRIVER, e.what());
  } catch (const CompileError& e) {
    return set_error(JITBRIDGE_ERROR_COMPILE, e.what());
  } catch (const NvrtcError& e) {
    return set_error(JITBRIDGE_ERROR_COMPILE, e.what());
  } catch (const std::invalid_argument& e) {
    return set_error(JITBRIDGE_ERROR_VALUE, e.what());
  } catch (const std::out_of_range& e) {  // no such kernel (the message lists those there are)
    return set_error(JITBRIDGE_ERROR_NOT_FOUND, e.what());
  } catch (const std::bad_alloc&) {
    return set_error(JITBRIDGE_ERROR_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return set_error(JITBRIDGE_ERROR_INTERNAL, e.what());
  } catch (...) {
    return set_error(JITBRIDGE_ERROR_INTERNAL, "an unknown C++ exception");
  }
}

// Runs `body` (returning nothing), turning any exception into a code. The one try/catch of every entry point.
template <class Body>
int guarded(Body&& body) noexcept {
  try {
    body();
    return JITBRIDGE_OK;
  } catch (...) {
    return current_error();
  }
}

int null_argument(const char* call, const char* what) noexcept {
  try {
    return set_error(JITBRIDGE_ERROR_VALUE, fmt::format("{}: {} is NULL", call, what).c_str());
  } catch (...) {
    return set_error(JITBRIDGE_ERROR_VALUE, what);
  }
}

// ---- entry points -------------------------------------------------------------------------

int last_error(const char** message, int* cuda_result) {
  if (message) *message = t_error.message.c_str();
  if (cuda_result) *cuda_result = t_error.cuda_result;
  return t_error.code;
}

std::vector<std::string> strings(const char* const* items, std::size_t n, const char* what) {
  std::vector<std::string> out;
  if (n && !items) throw std::invalid_argument(fmt::format("kernel_from_source: {} is NULL with a count of {}", what, n));
  for (std::size_t i = 0; i < n; ++i) {
    if (!items[i]) throw std::invalid_argument(fmt::format("kernel_from_source: {}[{}] is NULL", what, i));
    out.emplace_back(items[i]);
  }
  return out;
}

int kernel_from_source(const jitbridge_source* source, const char* name, jitbridge_kernel** out) {
  if (!out) return null_argument("kernel_from_source", "out");
  *out = nullptr;
  if (!source) return null_argument("kernel_from_source", "source");
  if (!name) return null_argument("kernel_from_source", "name");
  if (source->struct_size < sizeof(jitbridge_source))
    return set_error(JITBRIDGE_ERROR_VERSION, "kernel_from_source: source->struct_size is smaller than version 1.0's "
                                              "jitbridge_source (set it to sizeof(jitbridge_source))");
  if (!source->source) return null_argument("kernel_from_source", "source->source");
  return guarded([&] {
    CompileOptions options;
    options.options = strings(source->options, source->n_options, "options");
    options.name_expressions = strings(source->name_expressions, source->n_name_expressions, "name_expressions");
    const std::vector<std::string> names = strings(source->header_names, source->n_headers, "header_names");
    const std::vector<std::string> texts = strings(source->header_texts, source->n_headers, "header_texts");
    for (std::size_t i = 0; i < names.size(); ++i) options.headers.push_back({names[i], texts[i]});
    if (source->arch) options.arch = source->arch;
    std::shared_ptr<const Program> program = compile(source->source, options);
    const Kernel* info = program->find_kernel(name);
    if (!info) throw std::out_of_range(program->missing_kernel_message(name));
    *out = make_kernel(std::make_shared<const KernelPlan>(std::make_shared<const ModuleSet>(program), info->name,
                                                           info->lowered_name, info));
  });
}

int kernel_from_python_unsupported(void*, jitbridge_kernel** out) {
  if (out) *out = nullptr;
  return set_error(JITBRIDGE_ERROR_UNSUPPORTED, "kernel_from_python: this table was not made by jitbridge._core (use "
                                                "the capsule jitbridge._core._c_api)");
}

void kernel_retain(jitbridge_kernel* kernel) {
  if (kernel) kernel->refs.fetch_add(1, std::memory_order_relaxed);
}

void kernel_release(jitbridge_kernel* kernel) {
  if (kernel && kernel->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete kernel;
}

int kernel_info(const jitbridge_kernel* kernel, const char** name, std::int64_t* count) {
  if (!kernel) return null_argument("kernel_info", "kernel");
  if (name) *name = kernel->plan->name().c_str();
  if (count) {
    const Signature* sig = kernel->plan->signature();
    *count = sig ? static_cast<std::int64_t>(sig->params.size()) : -1;
  }
  return JITBRIDGE_OK;
}

int kernel_param(const jitbridge_kernel* kernel, std::size_t index, jitbridge_param* out) {
  if (!kernel) return null_argument("kernel_param", "kernel");
  if (!out) return null_argument("kernel_param", "out");
  if (out->struct_size < sizeof(jitbridge_param))
    return set_error(JITBRIDGE_ERROR_VERSION, "kernel_param: out->struct_size is smaller than version 1.0's "
                                              "jitbridge_param (set it to sizeof(jitbridge_param))");
  return guarded([&] {
    if (!kernel->plan->signature())
      throw std::invalid_argument(fmt::format("kernel_param: {} has no signature (a kernel from a binary image)",
                                              kernel->plan->name()));
    const Signature& sig = *kernel->plan->signature();
    if (index >= sig.params.size())
      throw std::invalid_argument(fmt::format("kernel_param: index {} is out of range; {}{} has {} parameters", index,
                                              kernel->plan->name(), sig.to_string(), sig.params.size()));
    const Param& p = sig.params[index];
    const ParamPlan& plan = kernel->plan->plan()[index];
    jitbridge_param param{};
    param.struct_size = out->struct_size;
    switch (plan.kind) {
      case ParamPlan::Kind::pointer: param.kind = JITBRIDGE_PARAM_POINTER; break;
      case ParamPlan::Kind::tensor_view: param.kind = JITBRIDGE_PARAM_TENSOR; break;
      case ParamPlan::Kind::scalar: param.kind = JITBRIDGE_PARAM_SCALAR; break;
      case ParamPlan::Kind::by_value: param.kind = JITBRIDGE_PARAM_BY_VALUE; break;
    }
    if (const std::optional<DLDataType> dtype = plan_dtype(plan)) {
      param.has_dtype = 1;
      param.dtype_code = dtype->code;
      param.dtype_bits = dtype->bits;
      param.dtype_lanes = dtype->lanes;
    }
    param.lanes = plan.lanes;
    param.rank = plan.rank;
    param.is_const = plan.pointee_const ? 1 : 0;
    param.size = p.size;
    param.align = p.align;
    param.type = p.type.c_str();
    param.spelling = p.spelling.c_str();
    std::memcpy(out, &param, sizeof param);
  });
}

int kernel_resolve(jitbridge_kernel* kernel, int device, jitbridge_function** out) {
  if (!out) return null_argument("kernel_resolve", "out");
  *out = nullptr;
  if (!kernel) return null_argument("kernel_resolve", "kernel");
  if (const ResolvedKernel* r = kernel->plan->resolved_on(device)) {
    *out = as_function(*r);
    return JITBRIDGE_OK;
  }
  return guarded([&] {
    if (device < 0 || device >= KernelPlan::kMaxDevices)
      throw std::invalid_argument(fmt::format("kernel_resolve: device {} is out of range (0 to {})", device,
                                              KernelPlan::kMaxDevices - 1));
    *out = as_function(kernel->plan->resolved(Device::get(device)));
  });
}

// A C array as the DLTensor it describes (no byte offset).
DLTensor as_dltensor(const jitbridge_array& r) {
  DLTensor t{};
  t.data = r.data;
  t.device = DLDevice{static_cast<DLDeviceType>(r.device_type), r.device_id};
  t.dtype = DLDataType{r.dtype_code, r.dtype_bits, r.dtype_lanes};
  t.ndim = r.ndim;
  t.shape = const_cast<std::int64_t*>(r.shape);
  t.strides = const_cast<std::int64_t*>(r.strides);
  return t;
}

// One C argument as the packer takes it. Arrays are validated as every view the Python path makes.
void fill_slot(const jitbridge_arg& a, std::size_t index, const Function& function, launch_detail::Slot& s) {
  ArgValue& v = s.value;
  switch (a.kind) {
    case JITBRIDGE_ARG_ARRAY: {
      // Read as the DLPack path reads a DLTensor (fill_from_dltensor: the one layout reader, validated).
      const jitbridge_array& r = a.array;
      try {
        fill_from_dltensor(as_dltensor(r), r.readonly != 0, s.view, "");
      } catch (const InteropError& e) {
        throw InteropError(e.kind(), fmt::format("{}: argument {}: {}", function.name(), index, e.what()));
      }
      v.kind = ArgValue::Kind::array;
      v.array = &s.view;
      return;
    }
    // python_type: how messages name the value ("got a C double; 'int' takes an integer").
    case JITBRIDGE_ARG_NULL: v.kind = ArgValue::Kind::null_pointer; return;
    case JITBRIDGE_ARG_INT: v.kind = ArgValue::Kind::signed_integer; v.i = a.i; v.python_type = "a C int64"; return;
    case JITBRIDGE_ARG_UINT: v.kind = ArgValue::Kind::unsigned_integer; v.u = a.u; v.python_type = "a C uint64"; return;
    case JITBRIDGE_ARG_FLOAT: v.kind = ArgValue::Kind::floating; v.f = a.f; v.python_type = "a C double"; return;
    case JITBRIDGE_ARG_BOOL: v.kind = ArgValue::Kind::boolean; v.i = a.i != 0; v.python_type = "a C bool"; return;
    case JITBRIDGE_ARG_COMPLEX:
      v.kind = ArgValue::Kind::complex;
      v.f = a.f;
      v.im = a.im;
      v.complex_single = false;
      v.python_type = "a C complex";
      return;
    case JITBRIDGE_ARG_BYTES:
      if (!a.bytes && a.n_bytes)
        throw ArgumentError(ArgumentError::Kind::value,
                            fmt::format("{}: argument {}: bytes is NULL with n_bytes {}", function.name(), index, a.n_bytes));
      v.kind = ArgValue::Kind::bytes;
      v.data = a.bytes;
      v.size = a.n_bytes;
      return;
    default:
      throw ArgumentError(ArgumentError::Kind::type, fmt::format("{}: argument {}: kind {} is not a JITBRIDGE_ARG_*",
                                                                 function.name(), index, a.kind));
  }
}

// The calling thread's slots for `n` arguments, reused (never shrink): nothing is constructed per launch. Only the
// arguments that need an ArrayView (a strided array) or the full path take them.
launch_detail::Slot* thread_slots(std::size_t n) {
  thread_local std::vector<launch_detail::Slot> slots(8);
  if (slots.size() < n) slots.resize(n);
  return slots.data();
}

// A C scalar or NULL for parameter `p` by its acceptor, from the caller's struct (the value fill_slot makes, taken
// as accept_value takes it): true when accepted and written at p.offset. False for anything accept_value would
// decline (a kind the acceptors leave to the full path: unsigned and complex values, and BYTES with NULL bytes, an
// unknown kind, whose error fill_slot words), having written nothing the launch uses. Never throws.
[[gnu::always_inline]] inline bool accept_scalar(const FastParam& p, const jitbridge_arg& a,
                                                 unsigned char* space) noexcept {
  using K = FastParam::Kind;
  switch (a.kind) {
    case JITBRIDGE_ARG_NULL:
      if (p.kind != K::pointer || p.size != sizeof(void*)) return false;
      accept_null(p, space);
      return true;
    case JITBRIDGE_ARG_INT: return p.kind == K::integer && accept_integer(p, a.i, space);
    case JITBRIDGE_ARG_FLOAT: return p.kind == K::floating && accept_floating(p, a.f, space);
    case JITBRIDGE_ARG_BOOL:
      if (p.kind != K::boolean) return false;
      accept_boolean(p, a.i != 0, space);
      return true;
    case JITBRIDGE_ARG_BYTES:
      return p.kind == K::bytes_only && (a.bytes || !a.n_bytes) && accept_bytes(p, a.bytes, a.n_bytes, space);
    default: return false;
  }
}

// A C-contiguous array (plain_fields: fill_from_dltensor would accept it as fill_slot reads it, as_dltensor) for
// parameter `p` by the array rule (accept_array), straight from the caller's struct: no DLTensor, slot or view.
// `device`: accept_array's, the launch's device (>= 0) for every array of the launch, so an array on another device
// makes the launch decline whichever array names it. 1: accepted and written; 0: declined; -1: not plain (the caller
// fills its slot). Never throws.
static_assert(sizeof(DLDataType) == 4 && offsetof(DLDataType, bits) == 1 && offsetof(DLDataType, lanes) == 2 &&
                  offsetof(jitbridge_array, dtype_bits) == offsetof(jitbridge_array, dtype_code) + 1 &&
                  offsetof(jitbridge_array, dtype_lanes) == offsetof(jitbridge_array, dtype_code) + 2,
              "jitbridge_array's dtype fields lie as a DLDataType");
[[gnu::always_inline]] inline int take_plain_array(const FastParam& p, const jitbridge_array& r, int& device,
                                                   unsigned char* space) noexcept {
  DLDataType dtype;  // as_dltensor's (code, bits, lanes), read as one word
  std::memcpy(&dtype, &r.dtype_code, sizeof dtype);
  if (!plain_fields(r.data, 0, dtype, r.ndim, r.shape, r.strides)) return -1;
  const DLDevice where{static_cast<DLDeviceType>(r.device_type), r.device_id};
  return accept_array(p, r.data, where, dtype, r.readonly != 0, device, space) ? 1 : 0;
}

// pack_accepted over the C arguments in one pass, each straight from the caller's struct where it can be: a scalar
// or NULL by accept_scalar, a C-contiguous array by take_plain_array; any other array is filled into its slot
// (fill_slot: validated, as the full path reads it) and goes to accept_value. A decline (false) leaves the slots as
// they were: the full path refills them. Throws what fill_slot throws for the first argument it refuses, as the full
// path would (every earlier argument was accepted, so it filled alike).
bool pack_fast(const std::vector<FastParam>& fast, const ParamLayout& layout, const jitbridge_arg* args, std::size_t n,
               const Function& function, int device, unsigned char* space) {
  if (fast.size() != n || layout.bytes > kFastSpaceBytes) return false;
  // The padding between parameters passes as zeros, never stack garbage (an accepted parameter is written whole).
  if (layout.padded) std::memset(space, 0, layout.bytes);
  int used = device;  // accept_array's device rule: every array on the launch's device (>= 0, so it stays)
  for (std::size_t i = 0; i < n; ++i) {
    const jitbridge_arg& a = args[i];
    if (a.kind != JITBRIDGE_ARG_ARRAY) {
      if (!accept_scalar(fast[i], a, space)) return false;
      continue;
    }
    const int took = take_plain_array(fast[i], a.array, used, space);
    if (took == 1) continue;
    if (took == 0) return false;
    launch_detail::Slot& s = thread_slots(n)[i];
    fill_slot(a, i, function, s);
    if (!accept_value(fast[i], s.value, used, space)) return false;
  }
  return true;
}

int launch(const jitbridge_function* function, const jitbridge_launch_config* config, const jitbridge_arg* args,
           std::size_t n_args, std::uint32_t flags) {
  if (!function) return null_argument("launch", "function");
  if (!config) return null_argument("launch", "config");
  if (n_args && !args) return null_argument("launch", "args");
  if (config->struct_size < sizeof(jitbridge_launch_config))
    return set_error(JITBRIDGE_ERROR_VERSION, "launch: config->struct_size is smaller than version 1.0's "
                                              "jitbridge_launch_config (set it to sizeof(jitbridge_launch_config))");
  // guarded()'s try/catch written out: the body stays in this frame (no closure call per launch).
  try {
    const ResolvedKernel& resolved = resolved_of(function);
    const Function& f = *resolved.function;
    const Device& device = *resolved.device;
    LaunchConfig c;
    c.grid = {config->grid[0], config->grid[1], config->grid[2]};
    c.block = {config->block[0], config->block[1], config->block[2]};
    c.shared_mem = config->shared_mem;
    c.stream = reinterpret_cast<CUstream>(config->stream);
    c.cluster = {config->cluster[0], config->cluster[1], config->cluster[2]};
    c.cooperative = config->cooperative != 0;
    c.programmatic_dependent = config->programmatic_dependent != 0;
    const bool check_args = (flags & JITBRIDGE_LAUNCH_NO_ARG_CHECKS) == 0;
    // The plan's acceptors, each argument filled and accepted in one pass; any decline: the full path decides.
    alignas(16) unsigned char space[kFastSpaceBytes];
    const ParamLayout* layout = resolved.plan ? resolved.plan->layout() : nullptr;
    if (layout && pack_fast(resolved.plan->fast(check_args), *layout, args, n_args, f, device.ordinal(), space)) {
      validate_launch_memo(f, c, device);
      jitbridge::launch(f, c, device, ParamBytes{space, layout->bytes, layout->offsets.data(), layout->offsets.size()});
      return JITBRIDGE_OK;
    }
    // pack_accepted would decline too (pack_fast applies its rules): straight to the full path.
    launch_detail::Slot* slots = thread_slots(n_args);
    for (std::size_t i = 0; i < n_args; ++i) fill_slot(args[i], i, f, slots[i]);
    thread_local ArgBuffer buffer;
    launch_detail::pack_all(f, slots, n_args, device.ordinal(), buffer, check_args);
    validate_launch_memo(f, c, device);
    jitbridge::launch(f, c, device, buffer);
    return JITBRIDGE_OK;
  } catch (...) {
    return current_error();
  }
}

int mem_alloc(int device, std::size_t bytes, CUstream_st* stream, std::uint64_t* out) {
  if (!out) return null_argument("mem_alloc", "out");
  *out = 0;
  if (bytes == 0) return JITBRIDGE_OK;
  return guarded([&] {
    const Device& dev = Device::get(device);
    const ContextGuard context(dev);
    CUdeviceptr ptr = 0;
    check(driver().cuMemAllocAsync(&ptr, bytes, reinterpret_cast<CUstream>(stream)), "cuMemAllocAsync");
    *out = static_cast<std::uint64_t>(ptr);
  });
}

int mem_free(int device, std::uint64_t ptr, CUstream_st* stream) {
  if (ptr == 0) return JITBRIDGE_OK;
  return guarded([&] {
    const Device& dev = Device::get(device);
    const ContextGuard context(dev);
    check(driver().cuMemFreeAsync(static_cast<CUdeviceptr>(ptr), reinterpret_cast<CUstream>(stream)), "cuMemFreeAsync");
  });
}

// ---- 1.1: memory from the configured allocator --------------------------------------------

// What alloc_async handed out and free_async has not taken back: the buffers, by device and address.
struct Allocations {
  std::mutex mutex;
  std::map<std::pair<int, std::uint64_t>, std::shared_ptr<DeviceBuffer>> live;  // guarded by mutex
};

Allocations& allocations() {
  static Allocations* a = new Allocations();  // leaked: frees may come from static destructors' threads
  return *a;
}

int alloc_async(int device, std::size_t bytes, CUstream_st* stream, std::uint64_t* out) {
  if (!out) return null_argument("alloc_async", "out");
  *out = 0;
  if (bytes == 0) return JITBRIDGE_OK;
  return guarded([&] {
    try {
      Device::get(device);  // checked before the allocator runs
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("alloc_async(device): {}", e.what()));
    }
    std::shared_ptr<DeviceBuffer> buffer =
        allocate_buffer(device, bytes, StreamRef(reinterpret_cast<CUstream>(stream)));
    const std::uint64_t ptr = static_cast<std::uint64_t>(buffer->ptr());
    Allocations& a = allocations();
    std::lock_guard<std::mutex> lock(a.mutex);
    a.live.emplace(std::make_pair(device, ptr), std::move(buffer));  // bad_alloc: the buffer goes back at once
    *out = ptr;
  });
}

int free_async(int device, std::uint64_t ptr, CUstream_st* stream) {
  if (ptr == 0) return JITBRIDGE_OK;
  std::shared_ptr<DeviceBuffer> buffer;
  {
    Allocations& a = allocations();
    std::lock_guard<std::mutex> lock(a.mutex);
    auto it = a.live.find(std::make_pair(device, ptr));
    if (it == a.live.end()) {
      try {
        return set_error(JITBRIDGE_ERROR_VALUE,
                         fmt::format("free_async: {:#x} on device {} is not from alloc_async, or was freed already",
                                     ptr, device)
                             .c_str());
      } catch (...) {
        return set_error(JITBRIDGE_ERROR_VALUE, "free_async: ptr is not from alloc_async");
      }
    }
    buffer = std::move(it->second);
    a.live.erase(it);
  }
  // The free waits for `stream` (hand_to); the buffer goes when this frame ends, outside the lock. A stream that
  // cannot be waited for is reported, and the buffer is freed anyway (its destructor synchronizes the context).
  return guarded([&] {
    std::shared_ptr<DeviceBuffer> going = std::move(buffer);
    try {
      going->hand_to(StreamRef(reinterpret_cast<CUstream>(stream)));
    } catch (...) {
      // The free cannot be ordered after `stream`: everything queued so far finishes first.
      const ContextGuard context(Device::get(device));
      driver().cuCtxSynchronize();
      throw;
    }
  });
}

const JitbridgeCApi kTable = {
    JITBRIDGE_C_API_MAJOR,
    JITBRIDGE_C_API_MINOR,
    static_cast<std::uint32_t>(sizeof(JitbridgeCApi)),
    0,
    JITBRIDGE_VERSION,
    last_error,
    kernel_from_source,
    kernel_from_python_unsupported,
    kernel_retain,
    kernel_release,
    kernel_info,
    kernel_param,
    kernel_resolve,
    launch,
    mem_alloc,
    mem_free,
    alloc_async,
    free_async,
};

}  // namespace

int set_error(int code, const char* message, int cuda_result) noexcept {
  LastError& e = t_error;
  e.code = code;
  e.cuda_result = cuda_result;
  try {
    e.message = message ? message : "";
  } catch (...) {
    e.message.clear();  // out of memory: the code alone
  }
  return code;
}

const JitbridgeCApi& core_table() { return kTable; }

jitbridge_kernel* make_kernel(std::shared_ptr<const KernelPlan> plan) {
  auto* kernel = new jitbridge_kernel();
  kernel->plan = std::move(plan);
  return kernel;
}

}  // namespace jitbridge::c_api

extern "C" const JitbridgeCApi* jitbridge_c_api_get(std::uint32_t major, std::uint32_t minor, char* why,
                                                    std::size_t why_size) {
  const JitbridgeCApi* table = &jitbridge::c_api::core_table();
  return jitbridge_c_api_check(table, major, minor, why, why_size) ? table : nullptr;
}
