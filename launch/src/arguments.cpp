// arguments.cpp — checks each launch argument against its parameter and writes it where the driver reads it.
#include "jitbridge/arguments.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "jitbridge/checked.hpp"
#include "jitbridge/vector_types.hpp"

namespace jitbridge {
namespace {

using Scalar = ParamPlan::Scalar;

// A scalar parameter's kind and size, from the one type table (dtype_for_pointee, vector_types.cpp): integers, bool,
// float, double, __half, __nv_bfloat16. Complex types have their own branch (complex_bits); fp8 and other types
// without a Scalar kind are passed by value.
bool scalar_for(std::string_view type, Scalar& kind, std::size_t& size) {
  if (complex_bits(type)) return false;
  const std::optional<DLDataType> d = dtype_for_pointee(type);
  if (!d || d->lanes != 1) return false;
  switch (d->code) {
    case kDLInt: kind = Scalar::signed_int; break;
    case kDLUInt: kind = Scalar::unsigned_int; break;
    case kDLBool: kind = Scalar::boolean; break;
    case kDLBfloat: kind = Scalar::bfloat16; break;
    case kDLFloat:
      if (d->bits == 16) kind = Scalar::half;
      else if (d->bits == 32 || d->bits == 64) kind = Scalar::floating;
      else return false;
      break;
    default: return false;
  }
  size = itemsize(*d);
  return true;
}

std::string describe(const ArgValue& v) {
  switch (v.kind) {
    case ArgValue::Kind::array: return fmt::format("a {} array on {}", dtype_name(v.array->dtype), device_name(v.array->device));
    case ArgValue::Kind::null_pointer: return "None";
    case ArgValue::Kind::bytes: return fmt::format("{} bytes", v.size);
    case ArgValue::Kind::complex: return v.python_type ? v.python_type : "a complex";
    default: return v.python_type ? v.python_type : "a number";
  }
}

[[noreturn]] void fail(ArgumentError::Kind kind, std::string_view kernel, std::size_t index, const Param& p,
                       const std::string& why) {
  throw ArgumentError(kind, fmt::format("{}: argument {} ({}): {}", kernel, index, p.spelling, why));
}

// jitbridge::Tensor<T, N> from tensor.cuh: {T* data; long long shape[N]; long long strides[N];}
bool tensor_view_type(std::string_view type, std::string& element, int& rank, bool& is_const) {
  constexpr std::string_view prefix = "jitbridge::Tensor<";
  if (type.substr(0, prefix.size()) != prefix || type.back() != '>') return false;
  std::string_view inner = type.substr(prefix.size(), type.size() - prefix.size() - 1);
  std::size_t comma = inner.rfind(',');
  if (comma == std::string_view::npos) return false;
  std::string_view t = inner.substr(0, comma);
  is_const = false;
  if (t.size() > 6 && t.substr(t.size() - 6) == " const") {
    is_const = true;
    t.remove_suffix(6);
  } else if (t.substr(0, 6) == "const ") {
    is_const = true;
    t.remove_prefix(6);
  }
  element = std::string(t);
  std::string_view digits = inner.substr(comma + 1);
  while (!digits.empty() && digits.front() == ' ') digits.remove_prefix(1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  return error == std::errc() && end == digits.data() + digits.size() && rank > 0;
}

// The alignment rule of vector and struct pointees: element 0 at a multiple of alignof(pointee).
void check_alignment(std::string_view kernel, std::size_t index, const Param& p, const ArrayView& a,
                     const ParamPlan& plan) {
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(a.ptr());
  if (plan.pointee_align > 1 && address % plan.pointee_align != 0)
    fail(ArgumentError::Kind::value, kernel, index, p,
         fmt::format("alignment: the array starts at {:#x}, which is not {}-byte aligned as '{}*' needs "
                     "(alignof({}) is {})", address, plan.pointee_align, plan.element, plan.element,
                     plan.pointee_align));
}

// float4*, __half2*, ...: the scalar dtype in a multiple of the lanes (or the vector dtype itself,
// or complex for float2/double2), aligned to the vector type.
void check_vector_array(std::string_view kernel, std::size_t index, const Param& p, const ArrayView& a,
                        const ParamPlan& plan) {
  const DLDataType vector{plan.dtype.code, plan.dtype.bits, static_cast<std::uint16_t>(plan.lanes)};
  const bool scalar = a.dtype == plan.dtype;
  if (!scalar && a.dtype != vector && !(plan.has_alt_dtype && a.dtype == plan.alt_dtype)) {
    std::string takes = dtype_name(plan.dtype);
    if (plan.has_alt_dtype) takes += " or " + dtype_name(plan.alt_dtype);
    fail(ArgumentError::Kind::type, kernel, index, p,
         fmt::format("dtype: got a {} array; '{}*' takes {}", dtype_name(a.dtype), plan.element, takes));
  }
  if (scalar && plan.lanes > 1) {
    const std::int64_t n = a.size();
    if (n % plan.lanes != 0)
      fail(ArgumentError::Kind::value, kernel, index, p,
           fmt::format("count: '{}*' reads {} {} per element; the array has {} elements, not a multiple of {}",
                       plan.element, plan.lanes, dtype_name(plan.dtype), n, plan.lanes));
  }
  check_alignment(kernel, index, p, a, plan);
}

// Pointers to user structs: a structured dtype of the struct's size, aligned to the struct.
void check_struct_array(std::string_view kernel, std::size_t index, const Param& p, const ArrayView& a,
                        const ParamPlan& plan) {
  if (!is_opaque_bytes(a.dtype))
    fail(ArgumentError::Kind::type, kernel, index, p,
         fmt::format("dtype: got a {} array; '{}*' points to a {}-byte struct: pass an array of a structured dtype "
                     "of {} bytes (NumPy/CuPy dtype with align=True), or declare the parameter void*",
                     dtype_name(a.dtype), plan.element, plan.pointee_size, plan.pointee_size));
  if (a.dtype.lanes != plan.pointee_size)
    fail(ArgumentError::Kind::type, kernel, index, p,
         fmt::format("size: the array's items have {} bytes; '{}' has {} (sizeof, with padding: build the "
                     "structured dtype with align=True)", a.dtype.lanes, plan.element, plan.pointee_size));
  check_alignment(kernel, index, p, a, plan);
}

void check_array(std::string_view kernel, std::size_t index, const Param& p, const ArrayView& a, const ParamPlan& plan,
                 PackResult& where) {
  if (!is_cuda(a.device))
    fail(ArgumentError::Kind::value, kernel, index, p,
         fmt::format("got an array in {} memory; kernels need device memory (cuda)", device_name(a.device)));
  if (where.device >= 0 && a.device.device_id != where.device)
    fail(ArgumentError::Kind::value, kernel, index, p,
         fmt::format("array is on cuda:{} but argument {} is on cuda:{}; all arrays must be on one device",
                     a.device.device_id, where.first_array, where.device));
  if (where.device < 0) {
    where.device = a.device.device_id;
    where.first_array = static_cast<int>(index);
  }
  if ((a.readonly || a.immutable_producer) && !plan.pointee_const) {
    if (a.immutable_producer)
      fail(ArgumentError::Kind::value, kernel, index, p,
           fmt::format("{} arrays are immutable; declare the parameter const, or pass check_args=False",
                       a.immutable_producer));
    fail(ArgumentError::Kind::value, kernel, index, p, "the array is read-only; the parameter needs a const pointee");
  }
  if (plan.any_dtype) return;
  if (plan.struct_items) {
    check_struct_array(kernel, index, p, a, plan);
    return;
  }
  if (!plan.has_dtype)
    fail(ArgumentError::Kind::type, kernel, index, p,
         fmt::format("got {}; a '{}*' parameter takes no array (declare it void* to pass raw memory)",
                     describe(ArgValue{ArgValue::Kind::array, &a}), plan.element));
  if (plan.lanes > 1 || plan.has_alt_dtype) {
    check_vector_array(kernel, index, p, a, plan);
    return;
  }
  if (!pointee_accepts(false, plan.char_like, plan.dtype, a.dtype))
    fail(ArgumentError::Kind::type, kernel, index, p,
         fmt::format("got a {} array; '{}*' takes {}", dtype_name(a.dtype), plan.element, dtype_name(plan.dtype)));
}

// Writes `n` bytes from `src` as parameter `index`: the one place argument bytes enter the buffer.
// The parameter must take exactly `n` bytes; a signature that says otherwise (a damaged one) is
// refused rather than written past.
void write(std::string_view kernel, ArgBuffer& out, std::size_t index, const Param& p, const void* src, std::size_t n) {
  if (n != p.size)
    fail(ArgumentError::Kind::type, kernel, index, p,
         fmt::format("the signature gives the parameter {} bytes but its value takes {}", p.size, n));
  void* at = out.slot(index, p.size, p.align);
  if (n) std::memcpy(at, src, n);
}

template <class T>
void put(std::string_view kernel, ArgBuffer& out, std::size_t index, const Param& p, T value) {
  write(kernel, out, index, p, &value, sizeof value);
}

// pack_unchecked's alignment for a parameter of `size` bytes: its size, at most 8.
std::size_t unchecked_align(std::size_t size) { return size >= 8 ? 8 : size; }

// The one layout rule (param_offsets, both ArgBuffer::reset and slot follow it): a parameter of `size`
// bytes goes at the next multiple of `align` (0 counts as 1) after `used`. Sets its offset and end;
// false when it would end past kMaxParamBytes (huge sizes included: nothing overflows).
bool place(std::size_t used, std::size_t size, std::size_t align, std::size_t& offset, std::size_t& end) {
  return checked::align_up(used, align, offset) && checked::add(offset, size, end) && end <= kMaxParamBytes;
}

[[noreturn]] void too_big(std::string_view where, std::size_t index, std::string_view what, std::size_t size) {
  throw ArgumentError(ArgumentError::Kind::value,
                      fmt::format("{}: parameter {} ({}, {} bytes) ends past the {} bytes CUDA allows for a kernel's "
                                  "parameters", where, index, what, size, kMaxParamBytes));
}

// Lays out `signature`'s parameters; returns where the last one ends, `offsets` (when given) gets
// each one's offset. Throws ArgumentError(value) past kMaxParamBytes.
std::size_t lay_out(const Signature& signature, std::vector<std::size_t>* offsets) {
  std::size_t used = 0, offset = 0;
  for (std::size_t i = 0; i < signature.params.size(); ++i) {
    const Param& p = signature.params[i];
    if (!place(used, p.size, p.align, offset, used)) too_big(signature.to_string(), i, p.spelling, p.size);
    if (offsets) offsets->push_back(offset);
  }
  return used;
}

// A complex parameter (float2/double2 and the complex class templates) takes a complex value, the
// real part first. Real numbers are refused: the parameter's exact type is complex.
void pack_complex(std::string_view kernel, std::size_t index, const Param& p, Scalar kind, const ArgValue& v,
                  ArgBuffer& out) {
  if (v.kind != ArgValue::Kind::complex)
    fail(ArgumentError::Kind::type, kernel, index, p,
         fmt::format("got {}; '{}' is complex and takes a complex (Python complex, numpy.complex64 or "
                     "numpy.complex128); real numbers are not converted: pass complex(x, 0)", describe(v), p.type));
  if (kind == Scalar::complex64) {
    if (!v.complex_single && (!float32_fits(v.f) || !float32_fits(v.im)))
      fail(ArgumentError::Kind::overflow, kernel, index, p,
           fmt::format("({}{:+}j) is out of range for '{}' (its parts are float)", v.f, v.im, p.type));
    const float parts[2] = {static_cast<float>(v.f), static_cast<float>(v.im)};
    write(kernel, out, index, p, parts, sizeof parts);
    return;
  }
  if (v.complex_single)
    fail(ArgumentError::Kind::type, kernel, index, p,
         fmt::format("got numpy.complex64; '{}' is complex of double: pass a Python complex or numpy.complex128",
                     p.type));
  const double parts[2] = {v.f, v.im};
  write(kernel, out, index, p, parts, sizeof parts);
}

void pack_scalar(std::string_view kernel, std::size_t index, const Param& p, Scalar kind, std::size_t size,
                 const ArgValue& v, ArgBuffer& out) {
  using K = ArgValue::Kind;
  if (kind == Scalar::complex64 || kind == Scalar::complex128) return pack_complex(kernel, index, p, kind, v, out);
  if (v.kind == K::complex)
    fail(ArgumentError::Kind::type, kernel, index, p,
         fmt::format("got {}; '{}' is not complex (complex values go only into cuComplex, cuDoubleComplex, float2, "
                     "double2, cuda::std::complex and thrust::complex parameters)", describe(v), p.type));
  const bool integral = v.kind == K::signed_integer || v.kind == K::unsigned_integer || v.kind == K::boolean;
  switch (kind) {
    case Scalar::boolean:
      if (v.kind != K::boolean)
        fail(ArgumentError::Kind::type, kernel, index, p, fmt::format("got {}; 'bool' takes True or False", describe(v)));
      put<std::uint8_t>(kernel, out, index, p, v.i != 0);
      return;
    case Scalar::signed_int:
    case Scalar::unsigned_int: {
      if (!integral)
        fail(ArgumentError::Kind::type, kernel, index, p, fmt::format("got {}; '{}' takes an integer", describe(v), p.type));
      bool fits;
      if (kind == Scalar::signed_int)
        fits = v.kind != K::unsigned_integer && signed_fits(v.i, size);
      else
        fits = v.kind == K::unsigned_integer ? unsigned_fits(v.u, size)
                                             : v.i >= 0 && unsigned_fits(static_cast<std::uint64_t>(v.i), size);
      if (!fits) {
        std::string shown = v.kind == K::unsigned_integer ? std::to_string(v.u) : std::to_string(v.i);
        fail(ArgumentError::Kind::overflow, kernel, index, p, fmt::format("{} does not fit in '{}'", shown, p.type));
      }
      const std::uint64_t raw = v.kind == K::unsigned_integer ? v.u : static_cast<std::uint64_t>(v.i);
      write(kernel, out, index, p, &raw, size);  // little-endian: the low bytes
      return;
    }
    default:
      break;
  }
  // Floating parameters take floats and integers (exactly as Python converts them).
  if (v.kind != K::floating && v.kind != K::signed_integer && v.kind != K::unsigned_integer)
    fail(ArgumentError::Kind::type, kernel, index, p, fmt::format("got {}; '{}' takes a number", describe(v), p.type));
  const double x = v.kind == K::floating ? v.f : v.kind == K::signed_integer ? static_cast<double>(v.i) : static_cast<double>(v.u);
  auto check_range = [&](double max) {
    if (std::isfinite(x) && std::fabs(x) > max)
      fail(ArgumentError::Kind::overflow, kernel, index, p, fmt::format("{} is out of range for '{}'", x, p.type));
  };
  switch (kind) {
    case Scalar::floating:
      if (size == 4) {
        if (!float32_fits(x))
          fail(ArgumentError::Kind::overflow, kernel, index, p, fmt::format("{} is out of range for '{}'", x, p.type));
        put(kernel, out, index, p, static_cast<float>(x));
      } else {
        put(kernel, out, index, p, x);
      }
      return;
    case Scalar::half:
      check_range(65504.0);
      put(kernel, out, index, p, __float2half_rn(static_cast<float>(x)));
      return;
    case Scalar::bfloat16:
      check_range(static_cast<double>(std::numeric_limits<float>::max()));
      put(kernel, out, index, p, __float2bfloat16_rn(static_cast<float>(x)));
      return;
    default:
      return;
  }
}

}  // namespace

bool float32_fits(double x) { return !std::isfinite(x) || std::fabs(x) <= std::numeric_limits<float>::max(); }

void ArgBuffer::prepare(std::size_t count, std::size_t total, bool param_space) {
  if (storage_.size() < total) storage_.resize(total);
  if (pointers_.size() < count) pointers_.resize(count);
  count_ = count;
  used_ = 0;
  param_space_ = param_space;
  offsets_ = nullptr;
}

void ArgBuffer::reset(const Signature& signature) {
  prepare(signature.params.size(), lay_out(signature, nullptr), true);
}

void ArgBuffer::reset(const Signature& signature, const ParamLayout* layout) {
  if (!layout) return reset(signature);
  prepare(signature.params.size(), layout->bytes, true);
  offsets_ = &layout->offsets;
}

std::optional<ParamLayout> param_layout(const Signature& signature) {
  ParamLayout layout;
  try {
    layout.bytes = lay_out(signature, &layout.offsets);
  } catch (const ArgumentError&) {
    return std::nullopt;
  }
  std::size_t covered = 0;  // parameters never overlap (lay_out places each past the one before)
  for (const Param& p : signature.params) covered += p.size;
  layout.padded = covered != layout.bytes;
  return layout;
}

void ArgBuffer::reset(const std::vector<std::size_t>& sizes) {
  std::size_t used = 0, offset = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    if (!place(used, sizes[i], unchecked_align(sizes[i]), offset, used)) too_big("kernel", i, "by the driver", sizes[i]);
  prepare(sizes.size(), used, false);
}

void* ArgBuffer::slot(std::size_t i, std::size_t size, std::size_t align) {
  std::size_t offset = 0, end = 0;
  if (i >= count_) throw std::logic_error("ArgBuffer::slot: parameter index past reset()'s count");
  // With a layout worked out before (reset(signature, layout)), its offset: the same rule, not recomputed.
  const bool placed = offsets_ ? (offset = (*offsets_)[i]) >= used_ && checked::add(offset, size, end)
                               : place(used_, size, align, offset, end);
  if (!placed || end > storage_.size()) throw std::logic_error("ArgBuffer::slot: reset() was given too small a total");
  void* at = storage_.data() + offset;
  used_ = end;
  pointers_[i] = at;
  return at;
}

std::string arity_message(std::string_view kernel_name, const Signature& signature, std::size_t given) {
  const std::size_t n = signature.params.size();
  return fmt::format("{}{} takes {} argument{}, {} given", kernel_name, signature.to_string(), n, n == 1 ? "" : "s", given);
}

std::vector<ParamPlan> plan_signature(const Signature& signature) {
  std::vector<ParamPlan> out;
  for (const Param& p : signature.params) {
    ParamPlan plan;
    std::string element;
    int rank = 0;
    bool element_const = false;
    if (p.kind == Param::Kind::pointer) {
      plan.kind = ParamPlan::Kind::pointer;
      element = p.type;
      element_const = p.is_const;
    } else if (tensor_view_type(p.type, element, rank, element_const)) {
      plan.kind = ParamPlan::Kind::tensor_view;
      plan.rank = rank;
    } else if (scalar_for(p.type, plan.scalar, plan.scalar_size)) {
      plan.kind = ParamPlan::Kind::scalar;
    } else if (const int bits = complex_bits(p.type); bits && p.size == static_cast<std::size_t>(bits / 8)) {
      plan.kind = ParamPlan::Kind::scalar;
      plan.scalar = bits == 64 ? Scalar::complex64 : Scalar::complex128;
      plan.scalar_size = p.size;
    } else {
      plan.kind = ParamPlan::Kind::by_value;
    }
    if (plan.kind == ParamPlan::Kind::pointer || plan.kind == ParamPlan::Kind::tensor_view) {
      plan.element = element;
      plan.pointee_const = element_const;
      plan.any_dtype = element == "void";
      plan.char_like = element == "char";
      plan.pointee_size = p.pointee_size;
      plan.pointee_align = p.pointee_align;
      const std::optional<VectorType> vector = vector_type(element);
      // A vector type whose size the compiler gave differently is not the CUDA one: no rule for it.
      const bool vector_fits = vector && (p.pointee_size == 0 || p.pointee_size == itemsize(vector->scalar) *
                                                                                     static_cast<std::size_t>(vector->lanes));
      if (plan.kind == ParamPlan::Kind::pointer && vector && vector_fits) {
        plan.has_dtype = true;
        plan.dtype = vector->scalar;
        plan.lanes = vector->lanes;
        if (const int bits = complex_bits(element)) {
          plan.has_alt_dtype = true;
          plan.alt_dtype = DLDataType{static_cast<std::uint8_t>(kDLComplex), static_cast<std::uint8_t>(bits), 1};
        }
        if (plan.pointee_align == 0) plan.pointee_align = itemsize(vector->scalar);
      } else if (std::optional<DLDataType> d = dtype_for_pointee(element)) {
        plan.has_dtype = true;
        plan.dtype = *d;
      } else if (plan.kind == ParamPlan::Kind::pointer && !plan.any_dtype && p.pointee_size > 0 &&
                 p.pointee_size <= 0xffff) {
        plan.struct_items = true;
      }
    }
    out.push_back(std::move(plan));
  }
  return out;
}

std::optional<DLDataType> plan_dtype(const ParamPlan& plan) {
  switch (plan.kind) {
    case ParamPlan::Kind::pointer:
    case ParamPlan::Kind::tensor_view:
      if (plan.has_dtype) return plan.dtype;
      return std::nullopt;
    case ParamPlan::Kind::by_value: return std::nullopt;
    case ParamPlan::Kind::scalar: break;
  }
  const auto bits = static_cast<std::uint8_t>(8 * plan.scalar_size);
  switch (plan.scalar) {
    case Scalar::signed_int: return DLDataType{kDLInt, bits, 1};
    case Scalar::unsigned_int: return DLDataType{kDLUInt, bits, 1};
    case Scalar::floating: return DLDataType{kDLFloat, bits, 1};
    case Scalar::half: return DLDataType{kDLFloat, 16, 1};
    case Scalar::bfloat16: return DLDataType{kDLBfloat, 16, 1};
    case Scalar::boolean: return DLDataType{kDLBool, 8, 1};
    case Scalar::complex64: return DLDataType{kDLComplex, 64, 1};
    case Scalar::complex128: return DLDataType{kDLComplex, 128, 1};
  }
  return std::nullopt;
}

std::vector<ParamPlan> unchecked_plan(std::vector<ParamPlan> plan) {
  for (ParamPlan& p : plan) {
    if (p.kind != ParamPlan::Kind::pointer && p.kind != ParamPlan::Kind::tensor_view) continue;
    p.any_dtype = true;
    p.pointee_const = true;
  }
  return plan;
}

void pack_argument(std::string_view kernel, const Signature& signature, std::size_t index, const ArgValue& v,
                   ArgBuffer& out, PackResult& where) {
  Signature one;
  one.params.push_back(signature.params[index]);
  std::vector<ParamPlan> plan(index + 1);
  plan[index] = plan_signature(one)[0];
  pack_argument(kernel, signature, plan, index, v, out, where);
}

void pack_argument(std::string_view kernel, const Signature& signature, const std::vector<ParamPlan>& plans,
                   std::size_t index, const ArgValue& v, ArgBuffer& out, PackResult& where) {
  const Param& p = signature.params[index];
  const ParamPlan& plan = plans[index];
  using K = ArgValue::Kind;
  switch (plan.kind) {
    case ParamPlan::Kind::pointer:
      if (v.kind == K::null_pointer) {
        put<void*>(kernel, out, index, p, nullptr);
        return;
      }
      if (v.kind != K::array)
        fail(ArgumentError::Kind::type, kernel, index, p,
             fmt::format("got {}; a pointer parameter takes an array (or None for NULL); wrap raw addresses "
                         "with jitbridge.from_ptr", describe(v)));
      check_array(kernel, index, p, *v.array, plan, where);
      put<void*>(kernel, out, index, p, v.array->ptr());
      return;
    case ParamPlan::Kind::tensor_view: {
      if (v.kind != K::array)
        fail(ArgumentError::Kind::type, kernel, index, p, fmt::format("got {}; a tensor view takes an array", describe(v)));
      const ArrayView& a = *v.array;
      check_array(kernel, index, p, a, plan, where);
      const int rank = plan.rank;
      if (a.ndim() != rank)
        fail(ArgumentError::Kind::value, kernel, index, p, fmt::format("got a {}-d array; the view has rank {}", a.ndim(), rank));
      const std::size_t want = 8 + 16 * static_cast<std::size_t>(rank);  // rank == ndim <= kMaxNdim
      if (p.size != want)
        fail(ArgumentError::Kind::type, kernel, index, p, fmt::format("unexpected tensor view layout ({} bytes)", p.size));
      auto* slot = static_cast<unsigned char*>(out.slot(index, want, p.align));
      void* data = a.ptr();
      std::memcpy(slot, &data, 8);
      std::memcpy(slot + 8, a.shape.data(), 8 * static_cast<std::size_t>(rank));
      std::memcpy(slot + 8 + 8 * static_cast<std::size_t>(rank), a.strides.data(), 8 * static_cast<std::size_t>(rank));
      return;
    }
    case ParamPlan::Kind::scalar:
      if (v.kind == K::bytes) {
        if (v.size != p.size)
          fail(ArgumentError::Kind::value, kernel, index, p, fmt::format("got {} bytes; the parameter has {}", v.size, p.size));
        write(kernel, out, index, p, v.data, v.size);
        return;
      }
      if (v.kind == K::array || v.kind == K::null_pointer)
        fail(ArgumentError::Kind::type, kernel, index, p, fmt::format("got {}; '{}' takes a scalar", describe(v), p.type));
      pack_scalar(kernel, index, p, plan.scalar, plan.scalar_size, v, out);
      return;
    case ParamPlan::Kind::by_value:
      // A struct (or any type without a scalar meaning) by value: its bytes, exactly.
      if (v.kind == K::complex)
        fail(ArgumentError::Kind::type, kernel, index, p,
             fmt::format("got {}; '{}' is not complex (complex values go only into cuComplex, cuDoubleComplex, "
                         "float2, double2, cuda::std::complex and thrust::complex parameters)", describe(v), p.type));
      if (v.kind != K::bytes)
        fail(ArgumentError::Kind::type, kernel, index, p,
             fmt::format("got {}; '{}' is passed by value: give bytes or a NumPy structured scalar of {} bytes",
                         describe(v), p.type, p.size));
      if (v.size != p.size)
        fail(ArgumentError::Kind::value, kernel, index, p, fmt::format("got {} bytes; '{}' has {} bytes", v.size, p.type, p.size));
      write(kernel, out, index, p, v.data, v.size);
      return;
  }
}

void pack_unchecked(std::size_t index, std::size_t size, const ArgValue& v, ArgBuffer& out, PackResult& where) {
  Param p;
  p.spelling = fmt::format("{} bytes", size);
  p.size = size;
  p.align = unchecked_align(size);
  using K = ArgValue::Kind;
  const std::string_view kernel = "kernel";
  switch (v.kind) {
    case K::array:
    case K::null_pointer: {
      if (size != 8) fail(ArgumentError::Kind::type, kernel, index, p, "a pointer needs an 8-byte parameter");
      void* ptr = nullptr;
      if (v.kind == K::array) {
        ParamPlan any;
        any.kind = ParamPlan::Kind::pointer;
        any.any_dtype = true;
        any.pointee_const = true;
        check_array(kernel, index, p, *v.array, any, where);
        ptr = v.array->ptr();
      }
      put(kernel, out, index, p, ptr);
      return;
    }
    case K::bytes:
      if (v.size != size) fail(ArgumentError::Kind::value, kernel, index, p, fmt::format("got {} bytes", v.size));
      write(kernel, out, index, p, v.data, size);
      return;
    case K::complex:
      if (size == 8 && (v.complex_single || (float32_fits(v.f) && float32_fits(v.im)))) {
        const float parts[2] = {static_cast<float>(v.f), static_cast<float>(v.im)};
        return write(kernel, out, index, p, parts, sizeof parts);
      }
      if (size == 8)
        fail(ArgumentError::Kind::overflow, kernel, index, p, "the complex is out of range for two 4-byte floats");
      if (size == 16) {
        const double parts[2] = {v.f, v.im};
        return write(kernel, out, index, p, parts, sizeof parts);
      }
      fail(ArgumentError::Kind::type, kernel, index, p, "a complex needs an 8- or 16-byte parameter");
    case K::floating:
      if (size == 4) {
        // A double outside float's range has no float value (converting it is undefined behaviour).
        if (!float32_fits(v.f))
          fail(ArgumentError::Kind::overflow, kernel, index, p, fmt::format("{} is out of range for a 4-byte float", v.f));
        return put(kernel, out, index, p, static_cast<float>(v.f));
      }
      if (size == 8) return put(kernel, out, index, p, v.f);
      // A NumPy float16 (exact in float) as the __half it was.
      if (size == 2 && v.float_bits == 16) return put(kernel, out, index, p, __float2half_rn(static_cast<float>(v.f)));
      fail(ArgumentError::Kind::type, kernel, index, p, "a float needs a 4- or 8-byte parameter");
    default: {
      if (size != 1 && size != 2 && size != 4 && size != 8)
        fail(ArgumentError::Kind::type, kernel, index, p, "an integer needs a 1-, 2-, 4- or 8-byte parameter");
      p.type = "integer";
      ArgValue as_int = v;
      Scalar kind = v.kind == K::unsigned_integer ? Scalar::unsigned_int : Scalar::signed_int;
      if (v.kind == K::boolean) {
        as_int.kind = size == 1 ? K::boolean : K::signed_integer;
        kind = size == 1 ? Scalar::boolean : Scalar::signed_int;
      }
      pack_scalar(kernel, index, p, kind, size, as_int, out);
    }
  }
}

std::vector<std::size_t> param_offsets(const Signature& signature) {
  std::vector<std::size_t> offsets;
  offsets.reserve(signature.params.size());
  lay_out(signature, &offsets);
  return offsets;
}

}  // namespace jitbridge
