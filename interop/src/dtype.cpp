// dtype.cpp — DLPack dtypes: names, sizes, and __cuda_array_interface__ typestrs.
#include "jitbridge/dtype.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "jitbridge/array.hpp"  // InteropError

namespace jitbridge {
namespace {

struct Named {
  const char* name;
  DLDataType dtype;
};

constexpr std::uint8_t code(DLDataTypeCode c) { return static_cast<std::uint8_t>(c); }

// Canonical names first: dtype_name() returns the first match.
const Named kNames[] = {
    {"bool", {code(kDLBool), 8, 1}},
    {"int8", {code(kDLInt), 8, 1}},
    {"int16", {code(kDLInt), 16, 1}},
    {"int32", {code(kDLInt), 32, 1}},
    {"int64", {code(kDLInt), 64, 1}},
    {"uint8", {code(kDLUInt), 8, 1}},
    {"uint16", {code(kDLUInt), 16, 1}},
    {"uint32", {code(kDLUInt), 32, 1}},
    {"uint64", {code(kDLUInt), 64, 1}},
    {"float16", {code(kDLFloat), 16, 1}},
    {"float32", {code(kDLFloat), 32, 1}},
    {"float64", {code(kDLFloat), 64, 1}},
    {"bfloat16", {code(kDLBfloat), 16, 1}},
    {"complex64", {code(kDLComplex), 64, 1}},
    {"complex128", {code(kDLComplex), 128, 1}},
    {"float8_e3m4", {code(kDLFloat8_e3m4), 8, 1}},
    {"float8_e4m3", {code(kDLFloat8_e4m3), 8, 1}},
    {"float8_e4m3b11fnuz", {code(kDLFloat8_e4m3b11fnuz), 8, 1}},
    {"float8_e4m3fn", {code(kDLFloat8_e4m3fn), 8, 1}},
    {"float8_e4m3fnuz", {code(kDLFloat8_e4m3fnuz), 8, 1}},
    {"float8_e5m2", {code(kDLFloat8_e5m2), 8, 1}},
    {"float8_e5m2fnuz", {code(kDLFloat8_e5m2fnuz), 8, 1}},
    {"float8_e8m0fnu", {code(kDLFloat8_e8m0fnu), 8, 1}},
    // aliases
    {"half", {code(kDLFloat), 16, 1}},
    {"float", {code(kDLFloat), 32, 1}},
    {"double", {code(kDLFloat), 64, 1}},
    {"bf16", {code(kDLBfloat), 16, 1}},
    {"bool_", {code(kDLBool), 8, 1}},
    {"int", {code(kDLInt), 64, 1}},
};

}  // namespace

std::string dtype_name(DLDataType dtype) {
  if (is_opaque_bytes(dtype)) return fmt::format("void{}", 8 * static_cast<unsigned>(dtype.lanes));
  DLDataType scalar{dtype.code, dtype.bits, 1};
  for (const Named& n : kNames) {
    if (n.dtype == scalar)
      return dtype.lanes == 1 ? std::string(n.name) : fmt::format("{}x{}", n.name, dtype.lanes);
  }
  return fmt::format("dtype(code={}, bits={}, lanes={})", dtype.code, dtype.bits, dtype.lanes);
}

std::optional<DLDataType> dtype_from_name(std::string_view name) {
  for (const Named& n : kNames)
    if (name == n.name) return n.dtype;
  // NumPy's name of a structured or raw-bytes dtype: "void<bits>" (np.dtype([...]).name).
  if (name.size() > 4 && name.substr(0, 4) == "void" && name.size() <= 11) {
    std::uint64_t bits = 0;
    for (char c : name.substr(4)) {
      if (c < '0' || c > '9') return std::nullopt;
      bits = bits * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (bits % 8 == 0 && bits >= 8 && bits / 8 <= 0xffff) return opaque_bytes(static_cast<std::size_t>(bits / 8));
  }
  return std::nullopt;
}

std::size_t itemsize(DLDataType dtype) {
  if (dtype.bits % 8 != 0) return 0;
  return static_cast<std::size_t>(dtype.bits / 8) * dtype.lanes;
}

DLDataType dtype_from_typestr(std::string_view typestr, std::string_view arg) {
  if (typestr.size() < 3)
    throw InteropError(InteropError::Kind::value,
                       fmt::format("{}: typestr '{}' is malformed (expected e.g. '<f4')", arg, typestr));
  char order = typestr[0], kind = typestr[1];
  std::string_view digits = typestr.substr(2);
  // Saturating: a size past any supported one (opaque items go up to 0xFFFF bytes) stays too big,
  // whatever its digits (leading zeros included), and is "not supported" below, not "malformed".
  constexpr std::uint32_t kPastAnySize = 1u << 20;
  std::uint32_t bytes = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      throw InteropError(InteropError::Kind::value, fmt::format("{}: typestr '{}' is malformed", arg, typestr));
    bytes = std::min(bytes * 10 + static_cast<std::uint32_t>(c - '0'), kPastAnySize);
  }
  if (order == '>' && bytes > 1)
    throw InteropError(InteropError::Kind::value,
                       fmt::format("{}: typestr '{}' is big-endian; only little-endian data is supported", arg, typestr));
  if (order != '<' && order != '|' && order != '=' && order != '>')
    throw InteropError(InteropError::Kind::value,
                       fmt::format("{}: typestr '{}' has an unknown byte order '{}'", arg, typestr, order));
  const std::uint8_t bits = static_cast<std::uint8_t>(bytes * 8);
  auto make = [&](DLDataTypeCode c) { return DLDataType{code(c), bits, 1}; };
  switch (kind) {
    case 'b': if (bytes == 1) return make(kDLBool); break;
    case 'i': if (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8) return make(kDLInt); break;
    case 'u': if (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8) return make(kDLUInt); break;
    case 'f': if (bytes == 2 || bytes == 4 || bytes == 8) return make(kDLFloat); break;
    case 'c': if (bytes == 8 || bytes == 16) return make(kDLComplex); break;
    case 'V':
      if (bytes == 2) return make(kDLBfloat);  // torch exports bfloat16 as "<V2"
      if (bytes >= 1 && bytes <= 0xFFFF) return opaque_bytes(bytes);  // structured items (|V<n>)
      break;
    default: break;
  }
  throw InteropError(InteropError::Kind::value,
                     fmt::format("{}: typestr '{}' is not a supported dtype", arg, typestr));
}

std::string typestr_of(DLDataType dtype) {
  if (is_opaque_bytes(dtype)) return fmt::format("|V{}", dtype.lanes);
  if (dtype.lanes != 1)
    throw InteropError(InteropError::Kind::value,
                       fmt::format("dtype {} has no __cuda_array_interface__ typestr", dtype_name(dtype)));
  const int bytes = dtype.bits / 8;
  switch (dtype.code) {
    case kDLBool: return "|b1";
    case kDLInt: return bytes == 1 ? "|i1" : fmt::format("<i{}", bytes);
    case kDLUInt: return bytes == 1 ? "|u1" : fmt::format("<u{}", bytes);
    case kDLFloat: return fmt::format("<f{}", bytes);
    case kDLComplex: return fmt::format("<c{}", bytes);
    case kDLBfloat: return "<V2";
    default: break;
  }
  if (dtype.bits == 8) return "|V1";  // fp8: raw bytes, named in the descr (cai_descr_name)
  throw InteropError(InteropError::Kind::value,
                     fmt::format("dtype {} has no __cuda_array_interface__ typestr", dtype_name(dtype)));
}

std::string cai_descr_name(DLDataType dtype) { return is_fp8(dtype) ? dtype_name(dtype) : std::string(); }

std::optional<DLDataType> fp8_from_descr_name(std::string_view name) {
  if (name.substr(0, 6) != "float8") return std::nullopt;  // no aliases ("bf16"-style) for fp8
  const std::optional<DLDataType> d = dtype_from_name(name);
  if (d && is_fp8(*d)) return d;
  return std::nullopt;
}

std::string device_name(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return fmt::format("cuda:{}", device.device_id);
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return fmt::format("cuda_managed:{}", device.device_id);
    default: return fmt::format("device(type={}, id={})", static_cast<int>(device.device_type), device.device_id);
  }
}

}  // namespace jitbridge
