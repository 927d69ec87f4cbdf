// jitbridge/dtype.hpp — DLPack dtypes and devices: names, sizes, __cuda_array_interface__ typestrs (dtype.cpp).
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace jitbridge {

// NumPy-style name of a DLPack dtype: "float32", "bfloat16", "bool", "complex64",
// "float8_e4m3fn", "int8"; lanes > 1 print as "float32x4". Unknown codes: "dtype(code=..)".
std::string dtype_name(DLDataType dtype);
// Items of `bytes` opaque bytes (a NumPy/CuPy structured dtype, typestr "|V<n>"; DLPack has no such
// type): {kDLOpaqueHandle, 8 bits, lanes = bytes}, so itemsize() is `bytes`. Named "void<bits>"
// as NumPy names them ("void128" for 16 bytes). 1 <= bytes <= 65535.
inline DLDataType opaque_bytes(std::size_t bytes) {
  return DLDataType{static_cast<std::uint8_t>(kDLOpaqueHandle), 8, static_cast<std::uint16_t>(bytes)};
}
inline bool is_opaque_bytes(DLDataType d) { return d.code == kDLOpaqueHandle && d.bits == 8 && d.lanes >= 1; }
// The dtype for a NumPy-style name (also "half", "float", "double", "bf16", "void<bits>" for
// opaque_bytes); nullopt if unknown.
std::optional<DLDataType> dtype_from_name(std::string_view name);
// Bytes per element (lanes included); 1 for bool; 0 for sub-byte types.
std::size_t itemsize(DLDataType dtype);
// Compared as one 32-bit word (code, bits, lanes: no padding).
inline bool operator==(DLDataType a, DLDataType b) {
  static_assert(sizeof(DLDataType) == sizeof(std::uint32_t), "DLDataType: code, bits and lanes in 4 bytes");
  std::uint32_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x == y;
}
inline bool operator!=(DLDataType a, DLDataType b) { return !(a == b); }
// A __cuda_array_interface__ typestr ("<f4", "|b1", "<V2" read as bfloat16, "<c8").
// Throws InteropError(value) (array.hpp) naming `arg` for big-endian, unknown or malformed strings.
DLDataType dtype_from_typestr(std::string_view typestr, std::string_view arg);
// The typestr jitbridge exports for a dtype ("<f4"); bfloat16 is "<V2" as torch writes it, the fp8
// dtypes "|V1" (the raw byte ml_dtypes' float8 types also write; cai_descr_name says which).
std::string typestr_of(DLDataType dtype);
// The 8-bit float dtypes (DLPack's kDLFloat8_* codes, one lane).
inline bool is_fp8(DLDataType d) {
  return d.code >= kDLFloat8_e3m4 && d.code <= kDLFloat8_e8m0fnu && d.bits == 8 && d.lanes == 1;
}
// The field name jitbridge writes in a __cuda_array_interface__ 'descr' ([(name, typestr)]) for
// `dtype`: the dtype's name for fp8 ("float8_e4m3fn"), so a "|V1" array can be read back as what it
// is (CuPy and Numba read the typestr only); "" for every other dtype (NumPy's unnamed field).
std::string cai_descr_name(DLDataType dtype);
// The fp8 dtype a CAI 'descr' field name names (cai_descr_name's inverse), else nullopt.
std::optional<DLDataType> fp8_from_descr_name(std::string_view name);

std::string device_name(DLDevice device);  // "cuda:0", "cpu"
// Memory a CUDA kernel can address: device memory or managed memory.
inline bool is_cuda(DLDevice device) { return device.device_type == kDLCUDA || device.device_type == kDLCUDAManaged; }
// Bytes per element for extents (validate_view's `item`): itemsize(), or 1 per element for sub-byte
// dtypes. bits <= 255 and lanes <= 65535, so this cannot overflow.
inline std::int64_t extent_item(DLDataType d) { return (std::int64_t{d.bits} * d.lanes + 7) / 8; }

}  // namespace jitbridge
