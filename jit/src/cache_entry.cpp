// cache_entry.cpp — the on-disk format of one cache entry, with its integrity check.
#include <cstring>

#include "cache_internal.hpp"
#include "jit_internal.hpp"

namespace jitbridge::detail {
namespace {

constexpr char kMagic[8] = {'J', 'B', 'C', 'A', 'C', 'H', 'E', '1'};
constexpr std::size_t kHashSize = 32;  // hex digits of XXH3-128

class Writer {
 public:
  void u64(std::uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(std::string_view s) {
    u64(s.size());
    out_.append(s.data(), s.size());
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

// Every read is bounds-checked; running off the end marks the reader failed.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::uint64_t u64() {
    std::uint64_t v = 0;
    if (in_.size() - pos_ < sizeof v) return fail(), 0;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string str() {
    std::uint64_t n = u64();
    if (failed_ || in_.size() - pos_ < n) return fail(), std::string();
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // A count of items that each take at least `min_bytes`: refuses counts the input cannot hold.
  std::uint64_t count(std::size_t min_bytes) {
    std::uint64_t n = u64();
    if (n > (in_.size() - pos_) / min_bytes) return fail(), 0;
    return n;
  }
  bool ok() const { return !failed_ && pos_ == in_.size(); }
  bool failed() const { return failed_; }

 private:
  void fail() { failed_ = true; }
  std::string_view in_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

void write_resources(Writer& w, const Resources& r) {
  w.u64(r.known);
  w.u64(static_cast<std::uint64_t>(r.registers));
  w.u64(static_cast<std::uint64_t>(r.barriers));
  w.u64(r.shared_bytes);
  w.u64(r.local_bytes);
  w.u64(r.const_bytes);
  w.u64(r.spill_store_bytes);
  w.u64(r.spill_load_bytes);
}

Resources read_resources(Reader& r) {
  Resources out;
  out.known = r.u64() != 0;
  out.registers = static_cast<int>(r.u64());
  out.barriers = static_cast<int>(r.u64());
  out.shared_bytes = r.u64();
  out.local_bytes = r.u64();
  out.const_bytes = r.u64();
  out.spill_store_bytes = r.u64();
  out.spill_load_bytes = r.u64();
  return out;
}

}  // namespace

std::string serialize_record(const std::string& key, const CacheRecord& record) {
  Writer w;
  const Program& p = *record.program;
  w.str(key);
  w.u64(static_cast<std::uint64_t>(record.recorded_ns));
  w.str(record.cwd);
  w.u64(record.deps.size());
  for (const Dependency& d : record.deps) {
    w.str(d.path);
    w.u64(d.size);
    w.u64(static_cast<std::uint64_t>(d.mtime_ns));
    w.str(d.hash);
  }
  w.str(p.arch);
  w.str(p.cubin);
  w.str(p.ptx);
  w.str(p.log);
  w.u64(p.options.size());
  for (const std::string& o : p.options) w.str(o);
  w.u64(p.lowered_names.size());
  for (const auto& [expr, lowered] : p.lowered_names) {
    w.str(expr);
    w.str(lowered);
  }
  w.u64(p.kernels.size());
  for (const Kernel& k : p.kernels) {
    w.str(k.name);
    w.str(k.lowered_name);
    write_resources(w, k.resources);
    w.u64(k.signature.has_value());
    if (!k.signature) continue;
    w.u64(k.signature->params.size());
    for (const Param& prm : k.signature->params) {
      w.u64(prm.kind == Param::Kind::pointer);
      w.str(prm.type);
      w.u64(prm.is_const);
      w.u64(prm.size);
      w.u64(prm.align);
      w.str(prm.spelling);
      w.u64(prm.pointee_size);
      w.u64(prm.pointee_align);
    }
  }
  w.str(p.link_input);
  w.u64(p.link_input_is_ltoir);
  w.u64(p.linked);
  w.u64(p.templates.size());
  for (const TemplateKernel& t : p.templates) {
    w.str(t.name);
    w.str(t.header);
  }
  std::string payload = std::move(w.bytes());
  std::string out(kMagic, sizeof kMagic);
  std::uint64_t size = payload.size();
  out.append(reinterpret_cast<const char*>(&size), sizeof size);
  out += hash_hex(payload);
  out += payload;
  return out;
}

std::optional<CacheRecord> parse_record(std::string_view bytes, const std::string& key) {
  constexpr std::size_t header = sizeof kMagic + sizeof(std::uint64_t) + kHashSize;
  if (bytes.size() < header || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return std::nullopt;
  std::uint64_t size = 0;
  std::memcpy(&size, bytes.data() + sizeof kMagic, sizeof size);
  std::string_view payload = bytes.substr(header);
  if (payload.size() != size) return std::nullopt;
  if (bytes.substr(sizeof kMagic + sizeof size, kHashSize) != hash_hex(payload)) return std::nullopt;

  Reader r(payload);
  if (r.str() != key || r.failed()) return std::nullopt;
  CacheRecord record;
  record.recorded_ns = static_cast<std::int64_t>(r.u64());
  if (record.recorded_ns < 0) return std::nullopt;  // dependencies_unchanged subtracts from it
  record.cwd = r.str();
  for (std::uint64_t n = r.count(32), i = 0; i < n; ++i) {
    Dependency d;
    d.path = r.str();
    d.size = r.u64();
    d.mtime_ns = static_cast<std::int64_t>(r.u64());
    d.hash = r.str();
    record.deps.push_back(std::move(d));
  }
  auto p = std::make_shared<Program>();
  p->arch = r.str();
  p->cubin = r.str();
  p->ptx = r.str();
  p->log = r.str();
  for (std::uint64_t n = r.count(8), i = 0; i < n; ++i) p->options.push_back(r.str());
  for (std::uint64_t n = r.count(16), i = 0; i < n; ++i) {
    std::string expr = r.str();
    p->lowered_names.emplace_back(std::move(expr), r.str());
  }
  for (std::uint64_t n = r.count(16), i = 0; i < n; ++i) {
    Kernel k;
    k.name = r.str();
    k.lowered_name = r.str();
    k.resources = read_resources(r);
    if (r.u64()) {
      Signature sig;
      for (std::uint64_t m = r.count(64), j = 0; j < m; ++j) {
        Param prm;
        prm.kind = r.u64() ? Param::Kind::pointer : Param::Kind::value;
        prm.type = r.str();
        prm.is_const = r.u64() != 0;
        prm.size = r.u64();
        prm.align = r.u64();
        prm.spelling = r.str();
        prm.pointee_size = r.u64();
        prm.pointee_align = r.u64();
        sig.params.push_back(std::move(prm));
      }
      k.signature = std::move(sig);
    }
    p->kernels.push_back(std::move(k));
  }
  p->link_input = r.str();
  p->link_input_is_ltoir = r.u64() != 0;
  p->linked = r.u64() != 0;
  for (std::uint64_t n = r.count(16), i = 0; i < n; ++i) {
    std::string name = r.str();
    p->templates.push_back({std::move(name), r.str()});
  }
  if (!r.ok()) return std::nullopt;
  p->origin = Origin::disk_cache;
  record.program = std::move(p);
  return record;
}

}  // namespace jitbridge::detail
