// jitbridge/arguments.hpp — packing launch arguments against a kernel's signature, checking each one.
#pragma once

#include <cstddef>
#include <optional>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "jitbridge/array.hpp"
#include "jitbridge/jit.hpp"

namespace jitbridge {

// A launch argument that does not fit its parameter. kind() says which Python exception it
// becomes: type (TypeError), overflow (OverflowError), value (ValueError).
class ArgumentError : public std::runtime_error {
 public:
  enum class Kind { type, overflow, value };
  ArgumentError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

// One argument as the caller gave it, before it meets a parameter. Borrowed: `array` and
// `bytes` point into storage the caller keeps alive until pack_argument returns.
struct ArgValue {
  enum class Kind { array, null_pointer, signed_integer, unsigned_integer, floating, boolean, bytes, complex };
  Kind kind = Kind::null_pointer;
  const ArrayView* array = nullptr;  // Kind::array
  std::int64_t i = 0;                // signed_integer, boolean (0/1)
  std::uint64_t u = 0;               // unsigned_integer (values above INT64_MAX)
  double f = 0;                      // floating; complex: the real part
  double im = 0;                     // complex: the imaginary part
  bool complex_single = false;       // complex: numpy.complex64 (both parts are floats)
  std::uint8_t float_bits = 64;      // floating: the caller's width (32: numpy.float32, 16: numpy.float16)
  const void* data = nullptr;        // bytes
  std::size_t size = 0;              // bytes
  const char* python_type = nullptr; // the caller's type name for messages ("float", "numpy.float64")
};

// The most bytes a kernel's parameters may take, as CUDA documents it (cuLaunchKernel: 32764 bytes
// since CUDA 12.1 on Volta and newer). Layouts that end past it are refused before anything is
// sized from them, so no size or offset arithmetic on parameters can overflow.
inline constexpr std::size_t kMaxParamBytes = 32764;

// The kernel parameter buffer: the argument bytes laid out as the parameters are, plus the
// void* array cuLaunchKernel takes. Inline storage for ordinary kernels; never shrinks.
class ArgBuffer {
 public:
  ArgBuffer() = default;
  ArgBuffer(const ArgBuffer&) = delete;
  ArgBuffer& operator=(const ArgBuffer&) = delete;
  // Prepares room for `signature`'s parameters. Packed in order (slot() with each parameter's
  // size and alignment), the bytes are then the kernel's parameter space: each parameter at its
  // param_offsets() offset, used() its end (param_space() is true). Throws ArgumentError(value)
  // when the layout ends past kMaxParamBytes (as param_offsets).
  void reset(const Signature& signature);
  // The same with the layout worked out before (param_layout): slot() then takes each parameter's offset from it.
  // nullptr: as reset(signature). `layout` must stay valid until the next reset.
  void reset(const Signature& signature, const struct ParamLayout* layout);
  // Prepares room for parameters of these sizes with no signature (pack_unchecked): the bytes
  // are reached through pointers() only (param_space() is false). Throws as reset(Signature).
  void reset(const std::vector<std::size_t>& sizes);
  // Where parameter i's `size` bytes go, aligned to `align`. Call in parameter order, at most
  // count() times; std::logic_error (a jitbridge bug) when the room reset() made is exceeded.
  void* slot(std::size_t i, std::size_t size, std::size_t align);
  void** pointers() { return pointers_.data(); }
  std::size_t count() const { return count_; }
  const unsigned char* bytes() const { return storage_.data(); }
  std::size_t used() const { return used_; }
  bool param_space() const { return param_space_; }

 private:
  void prepare(std::size_t count, std::size_t total, bool param_space);
  const std::vector<std::size_t>* offsets_ = nullptr;  // the layout's offsets, when reset with one
  std::vector<unsigned char> storage_ = std::vector<unsigned char>(512);
  std::vector<void*> pointers_ = std::vector<void*>(32);
  std::size_t count_ = 0, used_ = 0;
  bool param_space_ = false;
};

// The dtype a pointer parameter's pointee type takes ("float" -> float32, "__half" -> float16,
// "__nv_bfloat16" -> bfloat16, "int" -> int32, "float2" -> complex64, ...). nullopt for "void"
// (any dtype) and for types without a dtype (structs), which take no arrays.
std::optional<DLDataType> dtype_for_pointee(std::string_view type);
// 64 for the complex-of-float spellings (float2, cuda::std[::__N]::complex<float>,
// thrust[::...]::complex<float>), 128 for their double forms (double2, ...), else 0.
int complex_bits(std::string_view type);

// What packing needs to know of one parameter, worked out once per signature (so a launch does
// no string comparisons).
struct ParamPlan {
  enum class Kind { pointer, tensor_view, scalar, by_value };
  enum class Scalar { signed_int, unsigned_int, floating, half, bfloat16, boolean, complex64, complex128 };
  Kind kind = Kind::by_value;
  bool any_dtype = false;      // void*: any array
  bool has_dtype = false;      // the pointee/element type maps to a dtype
  bool char_like = false;      // char*: int8 or uint8
  DLDataType dtype{};          // when has_dtype
  bool pointee_const = false;  // const T* / Tensor<const T, N>
  std::string element;         // pointee/element type spelling, for messages
  int rank = 0;                // tensor views
  // Pointers to CUDA vector types (float4*, __half2*): `dtype` is the scalar dtype and each pointee
  // holds `lanes` of it; arrays must hold a multiple of `lanes` elements. 1 otherwise.
  int lanes = 1;
  bool has_alt_dtype = false;  // float2* / double2*: complex64 / complex128 arrays too
  DLDataType alt_dtype{};
  // Pointers to user structs (a complete pointee that has no dtype): arrays of a structured dtype
  // (opaque_bytes) of exactly pointee_size bytes per item.
  bool struct_items = false;
  std::size_t pointee_size = 0, pointee_align = 0;  // from the signature (0: unknown)
  Scalar scalar = Scalar::signed_int;
  std::size_t scalar_size = 0;
};
std::vector<ParamPlan> plan_signature(const Signature& signature);
// The dtype a parameter takes: a pointer's or tensor view's element (the scalar dtype of a vector pointee: `lanes`
// says how many), a scalar's own ("int" -> int32, "__half" -> float16, "__nv_bfloat16" -> bfloat16, float2 ->
// complex64). nullopt for void* (any dtype), pointers to structs and by-value structs.
std::optional<DLDataType> plan_dtype(const ParamPlan& plan);
// The plan of a launch whose argument checks the caller turned off (check_args=False): every
// pointer (and tensor view) takes an array of any dtype, count and alignment, read-only ones too.
// Device memory and the one-device rule still hold; scalars keep their rules.
std::vector<ParamPlan> unchecked_plan(std::vector<ParamPlan> plan);

// The acceptance rules pack_argument applies, as predicates (pack_argument adds the messages; the
// Python launch shortcut asks them alone).
// An array of dtype `got` for a pointee described by `any_dtype` (void), `char_like` (char: int8
// or uint8) and `want`.
inline bool pointee_accepts(bool any_dtype, bool char_like, DLDataType want, DLDataType got) {
  if (got == want || any_dtype) return true;  // the pointee's own dtype first: one compare for the usual array
  return char_like && (got.code == kDLUInt || got.code == kDLInt) && got.bits == 8 && got.lanes == 1;
}
// A Python integer `v` in a signed / unsigned integer parameter of `bytes` bytes (0 bytes hold only 0).
inline bool signed_fits(std::int64_t v, std::size_t bytes) {
  if (bytes >= 8) return true;
  if (bytes == 0) return v == 0;
  const std::int64_t half = std::int64_t{1} << (bytes * 8 - 1);
  return v >= -half && v < half;
}
inline bool unsigned_fits(std::uint64_t v, std::size_t bytes) {
  return bytes >= 8 || v < (std::uint64_t{1} << (bytes * 8));
}
// A Python float in a `float` parameter: finite values must be within float's range (infinities
// and NaN pass as they are).
bool float32_fits(double x);

// Where a launch happens: the arrays' device (all must agree) and the stream. Filled by pack.
struct PackResult {
  int device = -1;             // -1: no array argument named a device
  int first_array = -1;        // index of the first array argument
};

// Writes argument `index` (`value`) into `out` as parameter `param` of `kernel_name` wants it.
// Checks: arrays only into pointer parameters (or jitbridge::Tensor<T, N> views), pointee type
// against dtype (void* takes any; a vector type such as float4 takes its scalar dtype in a
// multiple of its lanes, at an address aligned to alignof(float4); a user struct takes a
// structured dtype of its size, aligned to its alignment), read-only arrays only into const
// pointees, device memory only
// (host memory refused), all arrays on one device; scalars exactly into the parameter's type
// with range checks (2**40 into int: OverflowError; 1.5 into int: TypeError); complex values only
// into complex parameters (float2, double2, cuda::std/thrust complex; parts must fit float for the
// float forms; numpy.complex64 only into those); bytes of exactly
// the parameter's size for structs; and that the signature's size for the parameter is the size
// of what gets written (a damaged signature is refused, never written past). Throws ArgumentError
// naming the kernel, the parameter and the reason.
void pack_argument(std::string_view kernel_name, const Signature& signature, const std::vector<ParamPlan>& plan,
                   std::size_t index, const ArgValue& value, ArgBuffer& out, PackResult& where);
// The same, planning the one parameter on the spot (for tests and one-off use).
void pack_argument(std::string_view kernel_name, const Signature& signature, std::size_t index,
                   const ArgValue& value, ArgBuffer& out, PackResult& where);

// Where each parameter lies in the kernel's parameter space by the C layout rules (each at the
// next multiple of its alignment): what cuKernelGetParamInfo must report (Function checks it).
// Every offset + size is at most kMaxParamBytes: a layout that ends past it (absurd sizes or
// alignments included) throws ArgumentError(value) naming the signature and the parameter.
std::vector<std::size_t> param_offsets(const Signature& signature);

// Where `signature`'s parameters lie in the parameter space (param_offsets's rule), worked out once per kernel: each
// offset and where the last one ends.
struct ParamLayout {
  std::vector<std::size_t> offsets;
  std::size_t bytes = 0;
  // Some of the `bytes` lie between parameters (alignment padding): a space packed parameter by parameter must zero
  // them first (the buffer form passes them); false: every byte belongs to a parameter.
  bool padded = false;
};
// nullopt when the layout ends past kMaxParamBytes (packing then throws param_offsets's error).
std::optional<ParamLayout> param_layout(const Signature& signature);

// The message for a wrong argument count: "saxpy(float, float const*, float*, int) takes 4
// arguments, 3 given".
std::string arity_message(std::string_view kernel_name, const Signature& signature, std::size_t given);

// Packs a parameter without a signature (kernels from .cubin/.ptx files): arrays and None as
// 8-byte pointers, ints as `size`-byte integers, floats as float (4) or double (8) (a NumPy float16
// also as __half into 2 bytes), bytes as is.
// `size` comes from cuKernelGetParamInfo. Throws ArgumentError when the value cannot fit (a float
// beyond float's range in 4 bytes: overflow).
void pack_unchecked(std::size_t index, std::size_t size, const ArgValue& value, ArgBuffer& out, PackResult& where);

}  // namespace jitbridge
