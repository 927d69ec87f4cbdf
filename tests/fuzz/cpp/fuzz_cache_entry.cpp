// fuzz_cache_entry.cpp — libFuzzer target: the disk cache's entry reader. Fuzzed entry bytes (mostly a payload given
// an intact header, so the parser past the integrity check is reached) are written where an entry belongs, as a
// regular file or as something that must be a prompt miss (symlink, FIFO, directory), then read back through the
// real reader (read_entry_file, parse_record, Cache lookup); results checked against ref::parse_entry.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "cache_internal.hpp"
#include "fuzz_support.hpp"
#include "jitbridge/jit.hpp"
#include "reference.hpp"

#include <fmt/format.h>

using namespace jitbridge;
namespace fs = std::filesystem;

namespace {

const std::string kKey = "0123456789abcdef0123456789abcdef";

// A private directory for the entries, and a FIFO the seeds name as a dependency (/tmp/jbfuzz.fifo: a
// fixed path, so that an entry can spell it). Both removed at exit; the FIFO only if this process made it (one
// that was there may be another run's).
struct Place {
  std::string dir, entries, entry, other;
  bool made_fifo = false;
  Place() {
    const char* tmp = std::getenv("TMPDIR");  // scripts/fuzz gives each run its own, removed afterwards
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/jbfuzz-cache-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    dir = tmpl;
    entries = dir + "/v1";
    if (::mkdir(entries.c_str(), 0700) != 0) std::abort();  // private whatever the umask: the cache checks it
    entry = entries + "/" + kKey + ".jbc";
    other = dir + "/target.jbc";
    made_fifo = ::mkfifo("/tmp/jbfuzz.fifo", 0600) == 0;
  }
  ~Place() {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (made_fifo) ::unlink("/tmp/jbfuzz.fifo");
  }
};
Place& place() {
  static Place p;
  return p;
}

void write_file(const std::string& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) std::abort();
}

void clear(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

enum class Kind { regular, symlink_to_entry, symlink_to_zero, fifo, directory };

[[noreturn]] void mismatch(const std::string& what) { jbfuzz::finding("wrong-result", "parse_record: " + what); }

void compare(const detail::CacheRecord& got, const jbfuzz::ref::RefRecord& want) {
  if (got.recorded_ns != static_cast<std::int64_t>(want.recorded_ns) || got.cwd != want.cwd) mismatch("time or cwd");
  if (got.deps.size() != want.deps.size()) mismatch("dependency count");
  for (std::size_t i = 0; i < got.deps.size(); ++i) {
    const auto& a = got.deps[i];
    const auto& b = want.deps[i];
    if (a.path != b.path || a.size != b.size || a.mtime_ns != static_cast<std::int64_t>(b.mtime_ns) || a.hash != b.hash)
      mismatch(fmt::format("dependency {}", i));
  }
  const Program& p = *got.program;
  if (p.arch != want.arch || p.cubin != want.cubin || p.ptx != want.ptx || p.log != want.log || p.options != want.options ||
      p.lowered_names != want.lowered_names)
    mismatch("program strings");
  if (p.origin != Origin::disk_cache) mismatch("origin");
  if (p.link_input != want.link_input || p.link_input_is_ltoir != want.link_input_is_ltoir || p.linked != want.linked)
    mismatch("link fields");
  if (p.templates.size() != want.templates.size()) mismatch("template count");
  for (std::size_t i = 0; i < p.templates.size(); ++i)
    if (p.templates[i].name != want.templates[i].first || p.templates[i].header != want.templates[i].second)
      mismatch(fmt::format("template {}", i));
  if (p.kernels.size() != want.kernels.size()) mismatch("kernel count");
  for (std::size_t i = 0; i < p.kernels.size(); ++i) {
    const Kernel& k = p.kernels[i];
    const auto& w = want.kernels[i];
    const Resources& r = k.resources;
    const std::uint64_t* x = w.resources;
    if (k.name != w.name || k.lowered_name != w.lowered_name || r.known != (x[0] != 0) ||
        r.registers != static_cast<int>(x[1]) || r.barriers != static_cast<int>(x[2]) || r.shared_bytes != x[3] ||
        r.local_bytes != x[4] || r.const_bytes != x[5] || r.spill_store_bytes != x[6] || r.spill_load_bytes != x[7])
      mismatch(fmt::format("kernel {}", i));
    if (k.signature.has_value() != w.has_signature) mismatch(fmt::format("kernel {} signature presence", i));
    if (!k.signature) continue;
    if (k.signature->params.size() != w.params.size()) mismatch(fmt::format("kernel {} parameter count", i));
    for (std::size_t j = 0; j < w.params.size(); ++j) {
      const Param& a = k.signature->params[j];
      const auto& b = w.params[j];
      if ((a.kind == Param::Kind::pointer) != b.pointer || a.type != b.type || a.is_const != b.is_const ||
          a.size != b.size || a.align != b.align || a.spelling != b.spelling ||
          a.pointee_size != b.pointee_size || a.pointee_align != b.pointee_align)
        mismatch(fmt::format("kernel {} parameter {}", i, j));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Place& where = place();
  const std::uint8_t frame = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  // Low 2 bits: 0 the bytes as they are, else an intact header for them; then the file kind.
  std::string bytes = (frame & 3) == 0 ? std::string(rest) : jbfuzz::ref::entry_header(rest) + std::string(rest);
  const Kind kind = static_cast<Kind>(((frame >> 2) & 7) < 4 ? 0 : ((frame >> 2) & 7) - 3);

  // 1. The parser alone.
  std::optional<jbfuzz::ref::RefRecord> want = jbfuzz::ref::parse_entry(bytes, kKey);
  if (want && static_cast<std::int64_t>(want->recorded_ns) < 0) want.reset();  // records before 1970 are refused
  std::optional<detail::CacheRecord> got;
  try {
    got = detail::parse_record(bytes, kKey);
  } catch (const std::bad_alloc&) {
    jbfuzz::finding("bad-exception", "parse_record: bad_alloc (sized an allocation from the file)");
  } catch (const std::exception& e) {
    jbfuzz::finding("bad-exception", std::string("parse_record threw: ") + e.what());
  }
  if (got && !want) jbfuzz::finding("wrong-acceptance", "parse_record accepted an entry the reference refuses");
  if (!got && want) jbfuzz::finding("wrong-refusal", "parse_record refused an intact entry");
  if (got) compare(*got, *want);

  // 2. The file reader: what is at the entry's path, read with a fuzzed cap.
  clear(where.entry);
  clear(where.other);
  switch (kind) {
    case Kind::regular: write_file(where.entry, bytes); break;
    case Kind::symlink_to_entry:
      write_file(where.other, bytes);
      if (::symlink(where.other.c_str(), where.entry.c_str()) != 0) std::abort();
      break;
    case Kind::symlink_to_zero:
      if (::symlink("/dev/zero", where.entry.c_str()) != 0) std::abort();
      break;
    case Kind::fifo:
      if (::mkfifo(where.entry.c_str(), 0600) != 0) std::abort();
      break;
    case Kind::directory: fs::create_directories(where.entry + "/sub"); break;
  }
  const std::uint64_t cap = (frame & 0x80) ? bytes.size() - (frame & 0x40 ? 1 : 0) : kMaxCacheEntryBytes;
  std::string read;
  const bool read_ok = detail::read_entry_file(where.entry, cap, read);
  const bool should_read = kind == Kind::regular && bytes.size() <= cap;
  if (read_ok != should_read)
    jbfuzz::finding(read_ok ? "wrong-acceptance" : "wrong-refusal",
                    fmt::format("read_entry_file: file kind {}, {} bytes, cap {}: {}", static_cast<int>(kind),
                                bytes.size(), cap, read_ok ? "read" : "not read"));
  if (read_ok && read != bytes) jbfuzz::finding("wrong-result", "read_entry_file: the bytes differ");

  // 3. A lookup through a cache on that directory: a miss unless a regular file holds an intact entry (and
  // then the program, when the entry names no dependency or directory to check).
  CacheConfig config;
  config.disk = true;
  config.directory = where.dir;
  Cache cache(config);
  std::shared_ptr<const Program> program;
  const auto start = std::chrono::steady_clock::now();
  try {
    program = cache.impl().lookup(kKey);
  } catch (const std::exception& e) {
    jbfuzz::finding("bad-exception", std::string("lookup threw: ") + e.what());
  }
  // A lookup reads a few files: a second means it blocked (a FIFO opened for reading waits for a writer;
  // libFuzzer's timer signal is what ended the wait here).
  if (std::chrono::steady_clock::now() - start > std::chrono::seconds(1))
    jbfuzz::finding("hang", "lookup blocked for more than a second (a FIFO or device read as an entry or dependency)");
  const bool hit_possible = kind == Kind::regular && want.has_value();
  if (program && !hit_possible) jbfuzz::finding("wrong-acceptance", "lookup returned a program for a damaged or non-regular entry");
  if (hit_possible && want->deps.empty() && want->cwd.empty() && !program)
    jbfuzz::finding("wrong-refusal", "lookup missed an intact entry without dependencies");
  return 0;
}
