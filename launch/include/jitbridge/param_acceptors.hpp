// jitbridge/param_acceptors.hpp — the launch fast path's parameters: what each parameter of a kernel takes without
// the full packing path (FastParam, worked out once per kernel in its KernelPlan), and one acceptor per kind, which
// checks a plain value by pack_argument's rules and writes it at the parameter's offset, or declines.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "jitbridge/arguments.hpp"

namespace jitbridge {

// The bytes of parameter space the fast path packs into (a stack buffer): kernels whose parameters end later take
// the full path.
inline constexpr std::size_t kFastSpaceBytes = 1024;

// One parameter as the fast path sees it. none: only the full path packs it (tensor views, vector and struct
// pointees, half, bfloat16 and complex scalars, parameters past kFastSpaceBytes); by-value parameters take only
// their exact bytes (bytes_only).
struct FastParam {
  enum class Kind : std::uint8_t { none, pointer, integer, boolean, floating, bytes_only };
  Kind kind = Kind::none;
  bool is_signed = true;      // integer
  // pointer of sizeof(void*) bytes: arrays too, not only NULL (vector and struct pointees, and a damaged signature's
  // pointer of another size: none; takes_array reads it)
  bool takes_arrays = false;
  bool any_dtype = false;     // pointer: void*
  bool char_like = false;     // pointer: char*
  bool pointee_const = false; // pointer: const T* (read-only and immutable arrays need it)
  std::uint16_t size = 0;     // the parameter's bytes
  std::uint16_t offset = 0;   // where they go in the parameter space
  // pointer, unless any_dtype. Aligned as a word (read as one: DLDataType's ==), which makes FastParam 16 bytes (a
  // plan's fast params are indexed by a shift).
  alignas(4) DLDataType dtype{};
};
static_assert(sizeof(FastParam) == 16, "FastParam: 16 bytes");

// The fast path's view of `signature` packed with `plan` (plan_signature or unchecked_plan) and laid out as
// `layout`: one FastParam per parameter.
std::vector<FastParam> fast_params(const Signature& signature, const std::vector<ParamPlan>& plan,
                                   const ParamLayout& layout);

// The acceptors. Each writes the value at p.offset in `space` (kFastSpaceBytes) and returns true, or returns false
// having written nothing the launch uses: the full path then decides and words the error. Never throw.

// The array rule (which arrays a pointer parameter takes without the full path), written once, in two halves that
// every fast lane calls: accept_array (pack_accepted, the typed launch, the C interface's pack_fast) both at once;
// the Python launch shortcut takes_array once when it learns a pattern, accept_pointer per array at each launch.
// Inline (no call, no allocation).
//
// The parameter's half: whether `p` takes an array at all (takes_arrays: a pointer of sizeof(void*) bytes whose
// pointee takes arrays) and, when the array is `readonly` (read-only or of an immutable producer), whether its
// pointee is const.
[[gnu::always_inline]] inline bool takes_array(const FastParam& p, bool readonly) noexcept {
  return p.takes_arrays && (!readonly || p.pointee_const);
}
// The array's half, for a parameter that takes_array: device memory (cuda or managed), on the launch's one device
// (`device`: -1 until the first array sets it; an array on another device is declined), of a dtype the pointee takes
// (pointee_accepts); the address is then written at p.offset.
[[gnu::always_inline]] inline bool accept_pointer(const FastParam& p, void* address, DLDevice where, DLDataType dtype,
                                                  int& device, unsigned char* space) noexcept {
  if (!is_cuda(where)) return false;
  if (where.device_id != device) {  // one compare for an array on the launch's device
    if (device >= 0) return false;
    device = where.device_id;
  }
  if (!pointee_accepts(p.any_dtype, p.char_like, p.dtype, dtype)) return false;
  std::memcpy(space + p.offset, &address, sizeof address);
  return true;
}
// NULL for a pointer parameter.
inline void accept_null(const FastParam& p, unsigned char* space) noexcept {
  void* null = nullptr;
  std::memcpy(space + p.offset, &null, sizeof null);
}
// An integer in its parameter's range (signed_fits / unsigned_fits), as its low bytes (little-endian), into a
// parameter of 1, 2, 4 or 8 bytes (any other size is a damaged signature: declined, the full path refuses it).
[[gnu::always_inline]] inline bool accept_integer(const FastParam& p, std::int64_t v, unsigned char* space) noexcept {
  if (p.is_signed ? !signed_fits(v, p.size) : (v < 0 || !unsigned_fits(static_cast<std::uint64_t>(v), p.size)))
    return false;
  switch (p.size) {  // fixed-size stores (a memcpy of p.size bytes is a call)
    case 1: space[p.offset] = static_cast<unsigned char>(v); return true;
    case 2: { const auto x = static_cast<std::uint16_t>(v); std::memcpy(space + p.offset, &x, 2); return true; }
    case 4: { const auto x = static_cast<std::uint32_t>(v); std::memcpy(space + p.offset, &x, 4); return true; }
    case 8: std::memcpy(space + p.offset, &v, 8); return true;
    default: return false;
  }
}
// True or False into a bool parameter.
inline void accept_boolean(const FastParam& p, bool v, unsigned char* space) noexcept {
  space[p.offset] = v ? 1 : 0;
}
// A number into a float (in float's range: float32_fits) or double parameter.
inline bool accept_floating(const FastParam& p, double x, unsigned char* space) noexcept {
  if (p.size == 8) {
    std::memcpy(space + p.offset, &x, 8);
    return true;
  }
  if (!float32_fits(x)) return false;
  const float f = static_cast<float>(x);
  std::memcpy(space + p.offset, &f, 4);
  return true;
}
// Exactly the parameter's bytes (any scalar or by-value parameter).
inline bool accept_bytes(const FastParam& p, const void* data, std::size_t n, unsigned char* space) noexcept {
  if (n != p.size) return false;
  std::memcpy(space + p.offset, data, n);
  return true;
}

// An array (validated, or C-contiguous by plain_fields; `readonly`: read-only or immutable) for any parameter: the
// array rule whole, takes_array then accept_pointer.
[[gnu::always_inline]] inline bool accept_array(const FastParam& p, void* address, DLDevice where, DLDataType dtype,
                                                bool readonly, int& device, unsigned char* space) noexcept {
  return takes_array(p, readonly) && accept_pointer(p, address, where, dtype, device, space);
}
// One value for parameter `p` by the acceptor of p's kind (the one dispatch of pack_accepted and the C interface's
// launch): true when accepted and written at p.offset; `device` as accept_pointer's. Arrays as pack_accepted's.
[[gnu::always_inline]] inline bool accept_value(const FastParam& p, const ArgValue& v, int& device,
                                                unsigned char* space) noexcept {
  using K = ArgValue::Kind;
  switch (p.kind) {
    case FastParam::Kind::none: return false;
    case FastParam::Kind::pointer: {
      if (p.size != sizeof(void*)) return false;  // a damaged signature: the full path refuses it
      if (v.kind == K::null_pointer) {
        accept_null(p, space);
        return true;
      }
      if (v.kind != K::array) return false;
      const ArrayView& a = *v.array;
      return accept_array(p, a.ptr(), a.device, a.dtype, a.readonly || a.immutable_producer, device, space);
    }
    case FastParam::Kind::integer: return v.kind == K::signed_integer && accept_integer(p, v.i, space);
    case FastParam::Kind::boolean:
      if (v.kind != K::boolean) return false;
      accept_boolean(p, v.i != 0, space);
      return true;
    case FastParam::Kind::floating:
      return v.kind == K::floating && v.float_bits == 64 && accept_floating(p, v.f, space);
    case FastParam::Kind::bytes_only: return v.kind == K::bytes && accept_bytes(p, v.data, v.size, space);
  }
  return false;
}

// Packs values[0..n) (`stride` bytes apart, as pack_values takes them) into `space` (kFastSpaceBytes) with the
// acceptors alone: `fast` is a plan's fast params (KernelPlan::fast), `bytes` its layout's size (ParamLayout::bytes).
// True when every value was accepted and the arrays are on `device`: `space`'s first `bytes` are then the parameter
// space (padding zeroed). False when any declines, having written nothing the launch uses: the full path
// (pack_values) then decides and words the error. Arrays must be validated views (validate_view); read-only and
// immutable ones go only to const pointees. Never throws.
bool pack_accepted(const std::vector<FastParam>& fast, std::size_t bytes, const ArgValue* values, std::size_t stride,
                   std::size_t n, int device, unsigned char* space) noexcept;

}  // namespace jitbridge
