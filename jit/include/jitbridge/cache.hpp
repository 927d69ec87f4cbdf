// jitbridge/cache.hpp — public C++ API of the kernel cache: in memory, and on disk across processes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace jitbridge {

class Program;

// The largest cache entry file jitbridge reads or writes (256 MiB, far above any compiled program
// with its PTX and log). A bigger file where an entry should be is a miss, never read; a program
// whose entry would be bigger is kept in memory only.
inline constexpr std::uint64_t kMaxCacheEntryBytes = std::uint64_t{256} << 20;

struct CacheConfig {
  bool disk = true;                 // JITBRIDGE_CACHE=0 turns it off
  std::string directory;            // JITBRIDGE_CACHE_DIR, else $XDG_CACHE_HOME/jitbridge, else ~/.cache/jitbridge
  std::uint64_t max_bytes = 1ull << 30;  // JITBRIDGE_CACHE_MAX_BYTES; least recently used entries go first
  // JITBRIDGE_CACHE_LOCK_TIMEOUT: how long (seconds) a process waits for another one compiling
  // the same key before compiling it itself; 0 never waits (docs/DESIGN.md, "Cache").
  double lock_timeout_s = 300;
  // JITBRIDGE_CACHE_TRUST_GROUP: a group (name or number) whose members may share the directory: it
  // may then belong to a member and be writable by that group, and entries written by members are
  // loaded (docs/DESIGN.md, "Multi-node use"). Empty: the directory and its entries must be the user's.
  std::string trust_group = {};
  // The configuration the environment asks for.
  static CacheConfig from_environment();
};

struct CacheInfo {
  std::string directory;
  bool disk = false;           // false when off or fallen back to memory
  std::string disk_reason;     // why disk is false ("" when it is on): the rule the directory broke, ...
  std::string trust_group;     // CacheConfig::trust_group
  std::uint64_t entries = 0;   // on disk
  std::uint64_t bytes = 0;     // on disk
  std::uint64_t memory_entries = 0;
  // Counted by this Cache since it was made (not by clear()):
  std::uint64_t compiles = 0;       // compile() misses that ran NVRTC (one per program, whatever its passes)
  std::uint64_t links = 0;          // link() misses that ran nvJitLink
  std::uint64_t lock_waits = 0;     // misses that found another process (or thread) compiling the key
  std::uint64_t lock_timeouts = 0;  // waits that ran past lock_timeout_s and compiled themselves
};

// Memory + disk cache of compiled programs. All methods are thread-safe; several processes may
// share one directory (entries are written to a temporary file and renamed into place). On a
// miss with the disk side on, one process (or thread) compiles a key while the others wait for
// its entry (an flock on <key>.lock beside it, dropped by the kernel if the holder dies; a wait
// ends after lock_timeout_s, and then the waiter compiles itself).
// Before the disk is used, the directory is checked once (detail::check_private_directory: the
// user's own, writable by no one else, and its ancestors too); entries and lock files must be
// regular files owned by the user. Nothing here throws for a bad, unsafe or unwritable directory:
// the disk side turns itself off with one warning (jitbridge::warn) and the memory side keeps working. A damaged entry, or anything that is
// not a regular file where an entry should be (a FIFO, a symlink, a device, a directory, a file
// over kMaxCacheEntryBytes), is a miss that never blocks and never turns the disk side off; the
// next store replaces it. A full disk or file size limit skips that one entry.
class Cache {
 public:
  explicit Cache(CacheConfig config);
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // The process-wide cache, configured from the environment at first use.
  static Cache& global();

  CacheInfo info() const;
  // Removes every entry (memory and disk). Returns the number of disk entries removed.
  std::uint64_t clear();
  const CacheConfig& config() const { return config_; }

  // --- used by compile(); not needed by users ---
  class Impl;
  Impl& impl() { return *impl_; }

 private:
  CacheConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace jitbridge
