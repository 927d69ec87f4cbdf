// reference.cpp — the view, typestr and cache-entry reference validators (see reference.hpp).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "reference.hpp"

#include <cstdio>
#include <cstring>

namespace jbfuzz::ref {
namespace {

__extension__ typedef __int128 i128;
constexpr i128 kInt64Max = INT64_MAX;
constexpr i128 kUint64Max = UINT64_MAX;
constexpr i128 kCap = static_cast<i128>(1) << 100;  // saturation: far beyond any limit checked, far from overflow

i128 saturate(i128 v) { return v > kCap ? kCap : v < -kCap ? -kCap : v; }
i128 mul(i128 a, i128 b) {  // a, b within ±2**100 or ±2**64: exact, then saturated
  if (a == 0 || b == 0) return 0;
  const i128 abs_a = a < 0 ? -a : a, abs_b = b < 0 ? -b : b;
  if (abs_a > kCap / abs_b) return (a < 0) != (b < 0) ? -kCap : kCap;
  return saturate(a * b);
}

ViewJudgement refuse(std::string why) {
  ViewJudgement j;
  j.verdict = Verdict::refuse;
  j.reason = std::move(why);
  return j;
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::accept: return "accept";
    case Verdict::refuse: return "refuse";
    case Verdict::either: return "either";
  }
  return "?";
}

std::uint64_t extent_itemsize(DLDataType dtype) {
  return (std::uint64_t{dtype.bits} * dtype.lanes + 7) / 8;  // whole bytes; a sub-byte element takes one
}

ViewJudgement judge_view(const ViewSpec& s) {
  if (s.dtype.lanes == 0) return refuse("the dtype has 0 lanes");
  if (s.dtype.bits == 0) return refuse("the dtype has 0 bits");
  if (s.ndim < 0) return refuse("ndim is negative");
  if (s.ndim > 64) return refuse("ndim is above 64");
  if (s.ndim > 0 && s.shape_null) return refuse("shape is NULL");
  const std::size_t n = static_cast<std::size_t>(s.ndim);
  const i128 item = static_cast<i128>(extent_itemsize(s.dtype));
  bool empty = false;
  i128 bytes = item;  // item times the non-zero extents: nbytes, and every C-order stride in bytes, fit under it
  for (std::size_t i = 0; i < n; ++i) {
    if (s.shape[i] < 0) return refuse("an extent is negative");
    if (s.shape[i] == 0) empty = true;
    else bytes = mul(bytes, s.shape[i]);
  }
  if (bytes > kInt64Max) return refuse("item size times the non-zero extents overflows int64");
  const i128 address = static_cast<i128>(s.data) + static_cast<i128>(s.byte_offset);
  if (address > kUint64Max) return refuse("data + byte_offset wraps past 2**64");

  ViewJudgement j;
  j.count = empty ? 0 : static_cast<std::int64_t>(bytes / item);
  j.address = static_cast<std::uint64_t>(address);
  std::vector<i128> strides(n);
  {
    i128 step = 1;  // C order: each stride the product of the later extents (an extent of 0 counts as 1)
    for (std::size_t i = n; i-- > 0;) {
      strides[i] = step;
      step = mul(step, s.shape[i] > 0 ? s.shape[i] : 1);
    }
  }
  if (!s.strides_null)
    for (std::size_t i = 0; i < n; ++i) strides[i] = s.strides[i];
  for (i128 st : strides) j.strides.push_back(static_cast<std::int64_t>(st));
  if (empty) return j;  // no element is addressed: any strides
  if (s.data == 0) return refuse("data is NULL but the array is not empty");
  i128 lo = 0, hi = 0;  // the nearest and furthest element from element 0, in elements
  for (std::size_t i = 0; i < n; ++i) {
    const i128 b = mul(strides[i], item);
    if (b > kInt64Max || b < -kInt64Max - 1) return refuse("a stride in bytes overflows int64");
    const i128 reach = mul(s.shape[i] - 1, strides[i]);
    if (reach < 0) lo = saturate(lo + reach);
    else hi = saturate(hi + reach);
  }
  const i128 span = mul(hi - lo + 1, item);
  if (span > kInt64Max) return refuse("the byte span overflows int64");
  const i128 low_address = address + mul(lo, item);
  const i128 high_address = address + mul(hi + 1, item) - 1;
  if (low_address < 0 || high_address > kUint64Max) return refuse("the addressed bytes wrap around the address space");
  return j;
}

std::optional<DLDataType> judge_typestr(std::string_view t) {
  if (t.size() < 3) return std::nullopt;
  const char order = t[0], kind = t[1];
  if (std::string_view("<>|=").find(order) == std::string_view::npos || order == '\0') return std::nullopt;
  std::uint64_t bytes = 0;
  for (char c : t.substr(2)) {
    if (c < '0' || c > '9') return std::nullopt;
    bytes = bytes * 10 + static_cast<std::uint64_t>(c - '0');
    if (bytes > 1000000) bytes = 1000000;  // saturate: no supported size is that large
  }
  if (order == '>' && bytes > 1) return std::nullopt;  // big-endian data
  // Every (kind, size) that names a dtype, listed one by one; 'V' of any other size up to 0xffff is structured items
  // of that many opaque bytes.
  struct Named {
    char kind;
    std::uint64_t bytes;
    DLDataTypeCode code;
  };
  static constexpr Named kNamed[] = {
      {'b', 1, kDLBool},   {'i', 1, kDLInt},   {'i', 2, kDLInt},   {'i', 4, kDLInt},       {'i', 8, kDLInt},
      {'u', 1, kDLUInt},   {'u', 2, kDLUInt},  {'u', 4, kDLUInt},  {'u', 8, kDLUInt},      {'f', 2, kDLFloat},
      {'f', 4, kDLFloat},  {'f', 8, kDLFloat}, {'c', 8, kDLComplex}, {'c', 16, kDLComplex},
      {'V', 2, kDLBfloat},  // bfloat16 as torch writes it
  };
  for (const Named& n : kNamed)
    if (n.kind == kind && n.bytes == bytes)
      return DLDataType{static_cast<std::uint8_t>(n.code), static_cast<std::uint8_t>(bytes * 8), 1};
  if (kind == 'V' && bytes >= 1 && bytes <= 0xffff)
    return DLDataType{static_cast<std::uint8_t>(kDLOpaqueHandle), 8, static_cast<std::uint16_t>(bytes)};
  return std::nullopt;
}

// ---- cache entries ------------------------------------------------------------------------------------

namespace {

constexpr char kMagic[] = "JBCACHE1";

class Cursor {
 public:
  explicit Cursor(std::string_view in) : in_(in) {}
  bool u64(std::uint64_t& v) {
    if (in_.size() < 8) return false;
    v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in_[static_cast<std::size_t>(i)]);
    in_.remove_prefix(8);
    return true;
  }
  bool str(std::string& s) {
    std::uint64_t n = 0;
    if (!u64(n) || n > in_.size()) return false;
    s.assign(in_.substr(0, static_cast<std::size_t>(n)));
    in_.remove_prefix(static_cast<std::size_t>(n));
    return true;
  }
  bool at_end() const { return in_.empty(); }

 private:
  std::string_view in_;
};

std::string hash_text(std::string_view payload) {
  const XXH128_hash_t h = XXH3_128bits(payload.data(), payload.size());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

bool parse_payload(Cursor& c, std::string_view key, RefRecord& r) {
  std::string stored_key;
  if (!c.str(stored_key) || stored_key != key) return false;
  std::uint64_t n = 0;
  if (!c.u64(r.recorded_ns) || !c.str(r.cwd) || !c.u64(n)) return false;
  for (std::uint64_t i = 0; i < n; ++i) {
    RefDependency d;
    if (!c.str(d.path) || !c.u64(d.size) || !c.u64(d.mtime_ns) || !c.str(d.hash)) return false;
    r.deps.push_back(std::move(d));
  }
  if (!c.str(r.arch) || !c.str(r.cubin) || !c.str(r.ptx) || !c.str(r.log) || !c.u64(n)) return false;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string o;
    if (!c.str(o)) return false;
    r.options.push_back(std::move(o));
  }
  if (!c.u64(n)) return false;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string a, b;
    if (!c.str(a) || !c.str(b)) return false;
    r.lowered_names.emplace_back(std::move(a), std::move(b));
  }
  if (!c.u64(n)) return false;
  for (std::uint64_t i = 0; i < n; ++i) {
    RefKernel k;
    if (!c.str(k.name) || !c.str(k.lowered_name)) return false;
    for (std::uint64_t& v : k.resources)
      if (!c.u64(v)) return false;
    std::uint64_t has = 0;
    if (!c.u64(has)) return false;
    k.has_signature = has != 0;
    if (k.has_signature) {
      std::uint64_t m = 0;
      if (!c.u64(m)) return false;
      for (std::uint64_t j = 0; j < m; ++j) {
        RefParam p;
        std::uint64_t pointer = 0, is_const = 0;
        if (!c.u64(pointer) || !c.str(p.type) || !c.u64(is_const) || !c.u64(p.size) || !c.u64(p.align) ||
            !c.str(p.spelling) || !c.u64(p.pointee_size) || !c.u64(p.pointee_align))
          return false;
        p.pointer = pointer != 0;
        p.is_const = is_const != 0;
        k.params.push_back(std::move(p));
      }
    }
    r.kernels.push_back(std::move(k));
  }
  std::uint64_t ltoir = 0, linked = 0;
  if (!c.str(r.link_input) || !c.u64(ltoir) || !c.u64(linked)) return false;
  r.link_input_is_ltoir = ltoir != 0;
  r.linked = linked != 0;
  if (!c.u64(n)) return false;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string a, b;
    if (!c.str(a) || !c.str(b)) return false;
    r.templates.emplace_back(std::move(a), std::move(b));
  }
  return c.at_end();
}

}  // namespace

std::string entry_header(std::string_view payload) {
  std::string out(kMagic, 8);
  std::uint64_t size = payload.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
  return out + hash_text(payload);
}

std::optional<RefRecord> parse_entry(std::string_view bytes, std::string_view key) {
  if (bytes.size() < 8 + 8 + 32 || bytes.substr(0, 8) != std::string_view(kMagic, 8)) return std::nullopt;
  Cursor size_cursor(bytes.substr(8, 8));
  std::uint64_t size = 0;
  size_cursor.u64(size);
  const std::string_view payload = bytes.substr(48);
  if (payload.size() != size || bytes.substr(16, 32) != hash_text(payload)) return std::nullopt;
  Cursor c(payload);
  RefRecord r;
  if (!parse_payload(c, key, r)) return std::nullopt;
  return r;
}

}  // namespace jbfuzz::ref
