// jitbridge/vector_types.hpp — CUDA's vector types (float4, int2, __half2, ...) as a scalar dtype and a lane count.
#pragma once

#include <optional>
#include <string_view>

#include "jitbridge/array.hpp"

namespace jitbridge {

// A CUDA vector type: `lanes` elements of `scalar` (float4 -> float32 x 4, uchar2 -> uint8 x 2,
// __half2 -> float16 x 2, double4_32a -> float64 x 4).
struct VectorType {
  DLDataType scalar{};
  int lanes = 1;
};

// The vector type a pointee spelling names, as the signature probe prints it: char1..4, uchar,
// short, ushort, int, uint, long, ulong, longlong, ulonglong, float, double with 1 to 4 lanes (the
// 4-lane 8-byte forms also as CUDA 13's *_16a / *_32a), __half2 / half2, __nv_bfloat162 /
// nv_bfloat162, __nv_fp8x2/x4_e4m3 / _e5m2. nullopt for anything else. Pure; never throws.
std::optional<VectorType> vector_type(std::string_view spelling);

}  // namespace jitbridge
