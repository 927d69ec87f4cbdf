// vector_types.cpp — CUDA vector type names (vector_types.h, cuda_fp16/bf16/fp8.h) to a scalar dtype and lanes.
#include "jitbridge/vector_types.hpp"

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

}  // namespace jitbridge
