// reference.hpp — the reference validators of the C++ fuzz targets: what an input must give, worked out
// apart from the code under test (exact 128-bit arithmetic, saturated; no jitbridge helper is reused).
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jbfuzz::ref {

// refuse: must be refused; accept: must be accepted; either: both are right (an edge the contract leaves
// open, docs/DESIGN.md "Fuzzing"), but an acceptance must still be free of undefined behaviour.
enum class Verdict { accept, refuse, either };
const char* verdict_name(Verdict v);

// ---- array views --------------------------------------------------------------------------------
// An array description as a DLTensor gives it (strides in elements; absent: C order).
struct ViewSpec {
  std::uint64_t data = 0;
  std::uint64_t byte_offset = 0;
  std::int64_t ndim = 0;
  bool shape_null = false;
  std::vector<std::int64_t> shape;    // ndim entries when ndim >= 0 and !shape_null
  bool strides_null = true;
  std::vector<std::int64_t> strides;  // ndim entries unless strides_null
  DLDataType dtype{kDLFloat, 32, 1};
};

struct ViewJudgement {
  Verdict verdict = Verdict::accept;
  std::string reason;                 // why it must be (or may be) refused
  std::int64_t count = 0;             // accepted: the element count
  std::uint64_t address = 0;          // accepted: data + byte_offset
  std::vector<std::int64_t> strides;  // accepted: strides in elements (C order filled in when none given)
};

// The view contract (docs in interop/include/jitbridge/array.hpp, validate_view): lanes, bits >= 1;
// 0 <= ndim <= 64; shape given when ndim > 0; extents >= 0; item (ceil(bits * lanes / 8)) times the
// non-zero extents fits int64; data + byte_offset fits 64 bits; a non-empty array has non-NULL data,
// every stride in bytes fits int64, its byte span (furthest element from the nearest, plus one item)
// fits int64, and its lowest and highest byte addresses lie in [0, 2**64). Empty arrays: any strides.
ViewJudgement judge_view(const ViewSpec& spec);

// A __cuda_array_interface__ typestr: the dtype it names, or nullopt when it must be refused.
std::optional<DLDataType> judge_typestr(std::string_view typestr);

// Bytes per item as the view contract counts them: ceil(bits * lanes / 8).
std::uint64_t extent_itemsize(DLDataType dtype);

// ---- cache entries ------------------------------------------------------------------------------
struct RefParam {
  bool pointer = false;
  std::string type;
  bool is_const = false;
  std::uint64_t size = 0, align = 0;
  std::string spelling;
  std::uint64_t pointee_size = 0, pointee_align = 0;
};
struct RefKernel {
  std::string name, lowered_name;
  std::uint64_t resources[8] = {};  // known, registers, barriers, shared, local, const, spill store, spill load
  bool has_signature = false;
  std::vector<RefParam> params;
};
struct RefDependency {
  std::string path;
  std::uint64_t size = 0, mtime_ns = 0;
  std::string hash;
};
struct RefRecord {
  std::uint64_t recorded_ns = 0;
  std::string cwd;
  std::vector<RefDependency> deps;
  std::string arch, cubin, ptx, log;
  std::vector<std::string> options;
  std::vector<std::pair<std::string, std::string>> lowered_names;
  std::vector<RefKernel> kernels;
  std::string link_input;  // after the kernels: link input, u64 "is LTO-IR", u64 "linked"
  bool link_input_is_ltoir = false, linked = false;
  std::vector<std::pair<std::string, std::string>> templates;  // name, template header
};

// The entry format (magic "JBCACHE1", u64 payload size, XXH3-128 of the payload as 32 lowercase hex
// digits, payload; every field little-endian u64 or u64-length-prefixed bytes, nothing after the last):
// the record, or nullopt when it must be refused (bad magic, size or hash, another key, truncated, trailing bytes).
std::optional<RefRecord> parse_entry(std::string_view bytes, std::string_view key);
// The header that makes `payload` an intact entry.
std::string entry_header(std::string_view payload);

}  // namespace jbfuzz::ref
