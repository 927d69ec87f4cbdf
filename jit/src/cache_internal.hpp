// cache_internal.hpp — the cache's moving parts: dependency records, entry files, Cache::Impl.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jitbridge/cache.hpp"
#include "jitbridge/jit.hpp"

namespace jitbridge::detail {

// A header file a compile read, as it was then.
struct Dependency {
  std::string path;  // absolute
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::string hash;  // XXH3-128 hex of the contents
};

// What one cache key maps to.
struct CacheRecord {
  std::shared_ptr<const Program> program;
  std::vector<Dependency> deps;
  std::string cwd;              // non-empty: a header was found relative to this directory
  std::int64_t recorded_ns = 0; // wall clock when the dependencies were hashed
};

// Dependencies from the header paths NVRTC's trace listed. In-memory headers (already in the
// key), toolkit headers (covered by the NVRTC version and toolkit path in the key) and NVRTC's
// built-in headers are left out. Sets `cwd` when a path was relative.
std::vector<Dependency> record_dependencies(const std::vector<std::string>& trace_paths,
                                            const std::vector<Header>& in_memory, std::string& cwd);
// True when every dependency still has the recorded contents (stat first; the contents are
// hashed again when size or mtime differ, or the mtime is too close to the record time to trust).
bool dependencies_unchanged(const CacheRecord& record);

// Entry files: magic, payload length, XXH3-128 of the payload, payload (key first).
std::string serialize_record(const std::string& key, const CacheRecord& record);
// nullopt for anything truncated, corrupted, of another format, or for another key.
std::optional<CacheRecord> parse_record(std::string_view bytes, const std::string& key);

std::int64_t now_ns();

}  // namespace jitbridge::detail

namespace jitbridge {

class Cache::Impl {
 public:
  explicit Impl(const CacheConfig& config);
  // Memory first, then disk. The Program returned has origin memory_cache or disk_cache.
  std::shared_ptr<const Program> lookup(const std::string& key);
  // Keeps `record` in memory and, when the disk side is on, writes it atomically.
  void store(const std::string& key, detail::CacheRecord record);
  CacheInfo info() const;
  std::uint64_t clear();

 private:
  std::string entry_path(const std::string& key) const;
  bool ensure_directory();            // false (after one warning) when the disk is unusable
  void disable_disk(const std::string& why);
  void write_entry(const std::string& key, const detail::CacheRecord& record);
  void evict_if_needed(const std::string& keep);
  void remember(const std::string& key, detail::CacheRecord record);

  CacheConfig config_;
  std::string entries_dir_;  // <directory>/v1
  mutable std::mutex mutex_;
  bool disk_ok_;
  bool dir_checked_ = false;
  std::unordered_map<std::string, detail::CacheRecord> memory_;
};

}  // namespace jitbridge
