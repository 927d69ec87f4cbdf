// reference_pack.cpp — the packing reference (see reference_pack.hpp): the parameter rules of docs/DESIGN.md
// "Launching" restated from the spelling of each parameter type, exact integer ranges, and independent
// float -> half / bfloat16 rounding.
#include "reference_pack.hpp"

#include <cfloat>
#include <cmath>
#include <cstring>

namespace jbfuzz::ref {
namespace {

__extension__ typedef __int128 i128;

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}
bool ends_with(std::string_view s, std::string_view t) { return s.size() >= t.size() && s.substr(s.size() - t.size()) == t; }
bool starts_with(std::string_view s, std::string_view t) { return s.substr(0, t.size()) == t; }

// What the pointee or element type takes: any dtype (void), int8 or uint8 (char), one dtype, or none.
struct Element {
  bool any = false, char_like = false, has = false;
  DLDataType dtype{};
};
Element element_of(std::string_view t) {
  struct Row {
    const char* spelling;
    std::uint8_t code, bits;
  };
  static const Row rows[] = {
      {"float", kDLFloat, 32}, {"double", kDLFloat, 64}, {"__half", kDLFloat, 16}, {"half", kDLFloat, 16},
      {"__nv_bfloat16", kDLBfloat, 16}, {"nv_bfloat16", kDLBfloat, 16}, {"int", kDLInt, 32}, {"unsigned int", kDLUInt, 32},
      {"short", kDLInt, 16}, {"unsigned short", kDLUInt, 16}, {"long", kDLInt, 64}, {"unsigned long", kDLUInt, 64},
      {"long long", kDLInt, 64}, {"unsigned long long", kDLUInt, 64}, {"signed char", kDLInt, 8}, {"char", kDLInt, 8},
      {"unsigned char", kDLUInt, 8}, {"bool", kDLBool, 8}, {"float2", kDLComplex, 64}, {"double2", kDLComplex, 128},
      {"__nv_fp8_e4m3", kDLFloat8_e4m3fn, 8}, {"__nv_fp8_e5m2", kDLFloat8_e5m2, 8},
      {"thrust::complex<float>", kDLComplex, 64}, {"thrust::complex<double>", kDLComplex, 128},
      {"cuda::std::__4::complex<float>", kDLComplex, 64}, {"cuda::std::__4::complex<double>", kDLComplex, 128},
      {"cuda::std::complex<float>", kDLComplex, 64}, {"cuda::std::complex<double>", kDLComplex, 128},
  };
  Element e;
  e.any = t == "void";
  e.char_like = t == "char";
  for (const Row& r : rows)
    if (t == r.spelling) {
      e.has = true;
      e.dtype = DLDataType{r.code, r.bits, 1};
    }
  return e;
}

bool same(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

// CUDA vector types by name: the scalar and the lanes (none: lanes 0). The 4-lane forms of 8-byte
// scalars also carry CUDA 13's _16a/_32a suffixes.
struct Vector {
  DLDataType scalar{};
  int lanes = 0;
};
Vector vector_of(std::string_view t) {
  if (t == "__half2" || t == "half2") return {{kDLFloat, 16, 1}, 2};
  if (t == "__nv_bfloat162" || t == "nv_bfloat162") return {{kDLBfloat, 16, 1}, 2};
  if (t == "__nv_fp8x2_e4m3") return {{kDLFloat8_e4m3fn, 8, 1}, 2};
  if (t == "__nv_fp8x4_e4m3") return {{kDLFloat8_e4m3fn, 8, 1}, 4};
  if (t == "__nv_fp8x2_e5m2") return {{kDLFloat8_e5m2, 8, 1}, 2};
  if (t == "__nv_fp8x4_e5m2") return {{kDLFloat8_e5m2, 8, 1}, 4};
  struct Row {
    const char* base;
    std::uint8_t code, bits;
  };
  static const Row rows[] = {{"char", kDLInt, 8},       {"uchar", kDLUInt, 8},       {"short", kDLInt, 16},
                             {"ushort", kDLUInt, 16},   {"int", kDLInt, 32},         {"uint", kDLUInt, 32},
                             {"long", kDLInt, 64},      {"ulong", kDLUInt, 64},      {"longlong", kDLInt, 64},
                             {"ulonglong", kDLUInt, 64}, {"float", kDLFloat, 32},    {"double", kDLFloat, 64}};
  for (const Row& r : rows)
    for (int lanes = 1; lanes <= 4; ++lanes) {
      const std::string name = std::string(r.base) + static_cast<char>('0' + lanes);
      if (t == name) return {{r.code, r.bits, 1}, lanes};
      if (lanes == 4 && r.bits == 64 && (t == name + "_16a" || t == name + "_32a")) return {{r.code, r.bits, 1}, 4};
    }
  return {};
}

// Complex by value: 64 (float2, cuda::std[::__N]::complex<float>, thrust[::...]::complex<float>), 128 for
// the double forms, else 0.
int complex_of(std::string_view t) {
  if (t == "float2") return 64;
  if (t == "double2") return 128;
  if (!starts_with(t, "cuda::std::") && !starts_with(t, "thrust::")) return 0;
  if (ends_with(t, "::complex<float>")) return 64;
  if (ends_with(t, "::complex<double>")) return 128;
  return 0;
}

// An array into a vector pointee (after the device and read-only rules): the scalar dtype in whole
// vectors, the vector dtype itself, or complex for float2/double2; aligned to `align` (the probe's, or the
// scalar's size when the signature has none).
const char* vector_problem(const jitbridge::ArrayView& a, const Vector& vec, int complex_bits, std::uint64_t align) {
  const bool scalar = same(a.dtype, vec.scalar);
  const bool whole = same(a.dtype, DLDataType{vec.scalar.code, vec.scalar.bits, static_cast<std::uint16_t>(vec.lanes)});
  const bool cplx = complex_bits && same(a.dtype, DLDataType{kDLComplex, static_cast<std::uint8_t>(complex_bits), 1});
  if (!scalar && !whole && !cplx) return "the dtype does not match the vector's scalar";
  if (scalar && vec.lanes > 1) {
    i128 n = 1;
    for (std::size_t i = 0; i < a.shape.size(); ++i) n *= a.shape.data()[i];
    if (n % vec.lanes != 0) return "not a whole number of vectors";
  }
  if (align == 0) align = vec.scalar.bits / 8;
  if (align > 1 && reinterpret_cast<std::uintptr_t>(a.ptr()) % align != 0) return "misaligned for the vector";
  return nullptr;
}

// The scalar parameter types: integer (signed or not), bool, or a floating kind, with their sizes.
enum class ScalarKind { none, sint, uint, boolean, f32, f64, f16, bf16 };
ScalarKind scalar_of(std::string_view t, std::size_t& bytes) {
  struct Row {
    const char* spelling;
    ScalarKind kind;
    std::size_t bytes;
  };
  static const Row rows[] = {
      {"int", ScalarKind::sint, 4}, {"unsigned int", ScalarKind::uint, 4}, {"long", ScalarKind::sint, 8},
      {"unsigned long", ScalarKind::uint, 8}, {"long long", ScalarKind::sint, 8}, {"unsigned long long", ScalarKind::uint, 8},
      {"short", ScalarKind::sint, 2}, {"unsigned short", ScalarKind::uint, 2}, {"char", ScalarKind::sint, 1},
      {"signed char", ScalarKind::sint, 1}, {"unsigned char", ScalarKind::uint, 1}, {"bool", ScalarKind::boolean, 1},
      {"float", ScalarKind::f32, 4}, {"double", ScalarKind::f64, 8}, {"__half", ScalarKind::f16, 2},
      {"__nv_bfloat16", ScalarKind::bf16, 2},
  };
  for (const Row& r : rows)
    if (t == r.spelling) {
      bytes = r.bytes;
      return r.kind;
    }
  return ScalarKind::none;
}

PackJudgement refuse(const char* why) {
  PackJudgement j;
  j.reason = why;
  return j;
}

template <class T>
PackJudgement accept_value(const PackParam& p, const T& v) {
  if (p.size != sizeof v) return refuse("the signature's size is not the value's");
  PackJudgement j;
  j.accept = true;
  j.bytes.resize(sizeof v);
  std::memcpy(j.bytes.data(), &v, sizeof v);
  return j;
}

// An array into a pointer or tensor view parameter whose element type is `element` (const or not).
const char* array_problem(const jitbridge::ArrayView& a, const Element& e, bool element_const, int& device) {
  const bool cuda = a.device.device_type == kDLCUDA || a.device.device_type == kDLCUDAManaged;
  if (!cuda) return "not device memory";
  if (device >= 0 && a.device.device_id != device) return "arrays on two devices";
  if (a.readonly && !element_const) return "read-only array into a non-const pointee";
  if (e.any) return nullptr;
  if (!e.has) return "the element type takes no array";
  if (same(a.dtype, e.dtype)) return nullptr;
  if (e.char_like && (a.dtype.code == kDLInt || a.dtype.code == kDLUInt) && a.dtype.bits == 8 && a.dtype.lanes == 1)
    return nullptr;
  return "the dtype does not match the element type";
}

}  // namespace

std::uint16_t half_bits(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00;                // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00;               // 65520 and up round to infinity
  if (a < 0x38800000u) {                                     // below 2**-14: a subnormal half (or 0)
    const double units = std::nearbyint(std::fabs(static_cast<double>(f)) * 16777216.0);  // in 2**-24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(units));
  }
  std::uint32_t h = ((((a >> 23) - 127 + 15) << 10) | ((a & 0x7fffffu) >> 13));
  const std::uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

std::uint16_t bfloat16_bits(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<std::uint16_t>(x >> 16);
}

PackPlanJudgement judge_layout(const std::vector<PackParam>& params) {
  PackPlanJudgement out;
  i128 used = 0;
  for (const PackParam& p : params) {
    const i128 align = p.align ? p.align : 1;
    const i128 offset = (used + align - 1) / align * align;
    used = offset + p.size;
    if (used > 32764) {
      out.layout_ok = false;
      return out;
    }
    out.offsets.push_back(static_cast<std::size_t>(offset));
  }
  out.end = static_cast<std::size_t>(used);
  return out;
}

PackJudgement judge_argument(const PackParam& p, const jitbridge::ArgValue& v, int& device) {
  using K = jitbridge::ArgValue::Kind;
  const std::string_view s = trim(p.spelling);
  // Pointers: a trailing '*'; the pointee without cv-qualifiers.
  if (ends_with(s, "*")) {
    std::string_view pointee = trim(s.substr(0, s.size() - 1));
    bool is_const = false;
    if (ends_with(pointee, " const")) {
      is_const = true;
      pointee = trim(pointee.substr(0, pointee.size() - 6));
    } else if (starts_with(pointee, "const ")) {
      is_const = true;
      pointee = trim(pointee.substr(6));
    }
    if (ends_with(pointee, " volatile")) pointee = trim(pointee.substr(0, pointee.size() - 9));
    if (v.kind == K::null_pointer) return accept_value(p, static_cast<std::uint64_t>(0));
    if (v.kind != K::array) return refuse("a pointer takes an array or None");
    int d = device;
    const Vector vec = vector_of(pointee);
    const bool vector_rule = vec.lanes > 0 && (p.pointee_size == 0 || p.pointee_size == vec.scalar.bits / 8 * static_cast<unsigned>(vec.lanes));
    if (vector_rule) {
      Element any;
      any.any = true;
      if (const char* why = array_problem(*v.array, any, is_const, d)) return refuse(why);
      if (const char* why = vector_problem(*v.array, vec, complex_of(pointee), p.pointee_align)) return refuse(why);
    } else if (const char* why = array_problem(*v.array, element_of(pointee), is_const, d)) {
      return refuse(why);
    }
    PackJudgement j = accept_value(p, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(v.array->ptr())));
    if (j.accept && device < 0) device = v.array->device.device_id;
    return j;
  }
  // Tensor views: jitbridge::Tensor<E, N>, N a positive decimal.
  if (starts_with(s, "jitbridge::Tensor<") && ends_with(s, ">")) {
    const std::string_view inner = s.substr(18, s.size() - 19);
    const std::size_t comma = inner.rfind(',');
    std::string_view digits = comma == std::string_view::npos ? "" : inner.substr(comma + 1);
    while (!digits.empty() && digits.front() == ' ') digits.remove_prefix(1);
    i128 rank = digits.empty() ? 0 : 0;
    bool numeric = !digits.empty();
    for (char c : digits) {
      if (c < '0' || c > '9') numeric = false;
      else if (rank < (i128{1} << 40)) rank = rank * 10 + (c - '0');
    }
    if (numeric && rank > 0 && rank <= INT32_MAX) {
      std::string_view element = inner.substr(0, comma);
      bool is_const = false;
      if (element.size() > 6 && ends_with(element, " const")) {
        is_const = true;
        element.remove_suffix(6);
      } else if (starts_with(element, "const ")) {
        is_const = true;
        element.remove_prefix(6);
      }
      if (v.kind != K::array) return refuse("a tensor view takes an array");
      const jitbridge::ArrayView& a = *v.array;
      int d = device;
      if (const char* why = array_problem(a, element_of(element), is_const, d)) return refuse(why);
      if (a.ndim() != rank) return refuse("the array's ndim is not the view's rank");
      const std::size_t n = static_cast<std::size_t>(rank);
      if (p.size != 8 + 16 * n) return refuse("the signature's size is not a tensor view's");
      PackJudgement j;
      j.accept = true;
      j.bytes.resize(p.size);
      const std::uint64_t ptr = reinterpret_cast<std::uintptr_t>(a.ptr());
      std::memcpy(j.bytes.data(), &ptr, 8);
      for (std::size_t i = 0; i < n; ++i) {
        std::memcpy(j.bytes.data() + 8 + 8 * i, &a.shape.data()[i], 8);
        std::memcpy(j.bytes.data() + 8 + 8 * n + 8 * i, &a.strides.data()[i], 8);
      }
      if (device < 0) device = a.device.device_id;
      return j;
    }
  }
  std::size_t bytes = 0;
  const ScalarKind kind = scalar_of(s, bytes);
  if (const int cbits = complex_of(s); kind == ScalarKind::none && cbits && p.size == static_cast<std::size_t>(cbits / 8)) {
    if (v.kind == K::bytes) {  // its bytes, exactly, as any scalar
      if (v.size != p.size) return refuse("bytes of another size than the parameter");
      PackJudgement j;
      j.accept = true;
      j.bytes.assign(static_cast<const unsigned char*>(v.data), static_cast<const unsigned char*>(v.data) + v.size);
      return j;
    }
    if (v.kind != K::complex) return refuse("a complex parameter takes a complex value");
    if (cbits == 64) {
      const bool fits = v.complex_single || ((!std::isfinite(v.f) || std::fabs(v.f) <= static_cast<double>(FLT_MAX)) &&
                                             (!std::isfinite(v.im) || std::fabs(v.im) <= static_cast<double>(FLT_MAX)));
      if (!fits) return refuse("a part beyond float's range");
      struct { float re, im; } c{static_cast<float>(v.f), static_cast<float>(v.im)};
      PackJudgement j = accept_value(p, c);
      return j;
    }
    if (v.complex_single) return refuse("numpy.complex64 into a complex of double");
    struct { double re, im; } c{v.f, v.im};
    return accept_value(p, c);
  }
  if (v.kind == K::complex) return refuse("a complex into a parameter that is not complex");
  if (kind == ScalarKind::none) {  // a struct by value: its bytes, exactly
    if (v.kind != K::bytes || v.size != p.size) return refuse("a by-value struct takes bytes of its size");
    PackJudgement j;
    j.accept = true;
    j.bytes.assign(static_cast<const unsigned char*>(v.data), static_cast<const unsigned char*>(v.data) + v.size);
    return j;
  }
  if (v.kind == K::bytes) {
    if (v.size != p.size) return refuse("bytes of another size than the parameter");
    PackJudgement j;
    j.accept = true;
    j.bytes.assign(static_cast<const unsigned char*>(v.data), static_cast<const unsigned char*>(v.data) + v.size);
    return j;
  }
  if (v.kind == K::array || v.kind == K::null_pointer) return refuse("a scalar takes no array or None");
  switch (kind) {
    case ScalarKind::boolean:
      if (v.kind != K::boolean) return refuse("bool takes True or False");
      return accept_value(p, static_cast<std::uint8_t>(v.i != 0));
    case ScalarKind::sint:
    case ScalarKind::uint: {
      if (v.kind == K::floating) return refuse("an integer parameter takes an integer");
      const i128 x = v.kind == K::unsigned_integer ? static_cast<i128>(v.u) : static_cast<i128>(v.i);
      const i128 lo = kind == ScalarKind::sint ? -(i128{1} << (8 * bytes - 1)) : 0;
      const i128 hi = kind == ScalarKind::sint ? (i128{1} << (8 * bytes - 1)) - 1 : (i128{1} << (8 * bytes)) - 1;
      if (x < lo || x > hi) return refuse("the integer does not fit the parameter");
      const std::uint64_t raw = static_cast<std::uint64_t>(x);  // two's complement, little-endian: the low bytes
      if (p.size != bytes) return refuse("the signature's size is not the value's");
      PackJudgement j;
      j.accept = true;
      j.bytes.resize(bytes);
      std::memcpy(j.bytes.data(), &raw, bytes);
      return j;
    }
    default: break;
  }
  if (v.kind == K::boolean) return refuse("a floating parameter takes a number, not a bool");
  const double x = v.kind == K::floating ? v.f : v.kind == K::signed_integer ? static_cast<double>(v.i) : static_cast<double>(v.u);
  const bool finite = std::isfinite(x);
  PackJudgement j;
  switch (kind) {
    case ScalarKind::f32:
      if (finite && std::fabs(x) > static_cast<double>(FLT_MAX)) return refuse("beyond float's range");
      j = accept_value(p, static_cast<float>(x));
      j.nan_at_4 = std::isnan(x);
      return j;
    case ScalarKind::f64: return accept_value(p, x);
    case ScalarKind::f16:
      if (finite && std::fabs(x) > 65504.0) return refuse("beyond half's range");
      j = accept_value(p, half_bits(static_cast<float>(x)));
      j.nan_at_2 = std::isnan(x);
      return j;
    default:
      if (finite && std::fabs(x) > static_cast<double>(FLT_MAX)) return refuse("beyond bfloat16's range");
      j = accept_value(p, bfloat16_bits(static_cast<float>(x)));
      j.nan_at_2 = std::isnan(x);
      return j;
  }
}

}  // namespace jbfuzz::ref
