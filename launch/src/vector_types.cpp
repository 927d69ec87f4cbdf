// vector_types.cpp — CUDA type spellings to dtypes: pointees (float, __half, ...), vector types (float4 -> float32 x 4)
// and complex types (float2, cuda::std::complex<float>, ...).
#include "jitbridge/vector_types.hpp"

#include "jitbridge/arguments.hpp"

namespace jitbridge {

std::optional<VectorType> vector_type(std::string_view s) {
  struct Special {
    const char* spelling;
    const char* scalar;
    int lanes;
  };
  static const Special specials[] = {
      {"__half2", "float16", 2},           {"half2", "float16", 2},
      {"__nv_bfloat162", "bfloat16", 2},   {"nv_bfloat162", "bfloat16", 2},
      {"__nv_fp8x2_e4m3", "float8_e4m3fn", 2}, {"__nv_fp8x4_e4m3", "float8_e4m3fn", 4},
      {"__nv_fp8x2_e5m2", "float8_e5m2", 2},   {"__nv_fp8x4_e5m2", "float8_e5m2", 4},
  };
  for (const Special& e : specials)
    if (s == e.spelling) return VectorType{*dtype_from_name(e.scalar), e.lanes};

  // <base><lanes>[_16a|_32a]
  bool aligned_form = false;
  if (s.size() > 4 && (s.substr(s.size() - 4) == "_16a" || s.substr(s.size() - 4) == "_32a")) {
    aligned_form = true;
    s.remove_suffix(4);
  }
  if (s.size() < 2) return std::nullopt;
  const char digit = s.back();
  if (digit < '1' || digit > '4') return std::nullopt;
  const int lanes = digit - '0';
  s.remove_suffix(1);
  struct Base {
    const char* name;
    const char* scalar;
  };
  static const Base bases[] = {
      {"char", "int8"},       {"uchar", "uint8"},      {"short", "int16"},       {"ushort", "uint16"},
      {"int", "int32"},       {"uint", "uint32"},      {"long", "int64"},        {"ulong", "uint64"},
      {"longlong", "int64"},  {"ulonglong", "uint64"}, {"float", "float32"},     {"double", "float64"},
  };
  for (const Base& b : bases) {
    if (s != b.name) continue;
    const DLDataType scalar = *dtype_from_name(b.scalar);
    // Only the 4-lane forms of 8-byte scalars have the _16a/_32a spellings (CUDA 13).
    if (aligned_form && (lanes != 4 || scalar.bits != 64)) return std::nullopt;
    return VectorType{scalar, lanes};
  }
  return std::nullopt;
}

std::optional<DLDataType> dtype_for_pointee(std::string_view type) {
  struct Entry {
    const char* spelling;
    const char* dtype;
  };
  static const Entry table[] = {
      {"float", "float32"},        {"double", "float64"},       {"__half", "float16"},
      {"half", "float16"},         {"__nv_bfloat16", "bfloat16"}, {"nv_bfloat16", "bfloat16"},
      {"int", "int32"},            {"unsigned int", "uint32"},  {"short", "int16"},
      {"unsigned short", "uint16"}, {"long", "int64"},          {"unsigned long", "uint64"},
      {"long long", "int64"},      {"unsigned long long", "uint64"}, {"signed char", "int8"},
      {"char", "int8"},            {"unsigned char", "uint8"},  {"bool", "bool"},
      {"__nv_fp8_e4m3", "float8_e4m3fn"}, {"__nv_fp8_e5m2", "float8_e5m2"},
  };
  for (const Entry& e : table)
    if (type == e.spelling) return dtype_from_name(e.dtype);
  if (const int bits = complex_bits(type)) return DLDataType{static_cast<std::uint8_t>(kDLComplex), static_cast<std::uint8_t>(bits), 1};
  return std::nullopt;
}

int complex_bits(std::string_view type) {
  if (type == "float2") return 64;
  if (type == "double2") return 128;
  // cuda::std::complex<T>, thrust::complex<T>, either with inline namespaces (cuda::std::__4::).
  const bool library = type.substr(0, 11) == "cuda::std::" || type.substr(0, 8) == "thrust::";
  if (!library) return 0;
  auto ends = [type](std::string_view suffix) {
    return type.size() >= suffix.size() && type.substr(type.size() - suffix.size()) == suffix;
  };
  if (ends("::complex<float>")) return 64;
  if (ends("::complex<double>")) return 128;
  return 0;
}

}  // namespace jitbridge
