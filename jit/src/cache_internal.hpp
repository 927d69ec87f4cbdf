// cache_internal.hpp — the cache's moving parts: dependency records, entry files, Cache::Impl.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jitbridge/cache.hpp"
#include "jitbridge/jit.hpp"
#include "jitbridge/private_dir.hpp"

namespace jitbridge::detail {

// A header file a compile read, as it was then; or (absent) a path that did not exist then and
// must stay absent: a file there would shadow a header the compile read from a later include dir.
struct Dependency {
  std::string path;  // absolute
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::string hash;  // XXH3-128 hex of the contents; empty exactly for an absence (entry format)
  bool absent() const { return hash.empty(); }
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
// built-in headers are left out. Sets `cwd` when a path was relative. `search_dirs` are the
// include directories in NVRTC's search order (include_search_dirs()): for a header read from
// search_dirs[k] as <R>, each earlier non-toolkit dir D gets an absence for D/<R> (or for its
// first missing ancestor, so 600 cub headers under a dir without "cub/" cost one record).
std::vector<Dependency> record_dependencies(const std::vector<std::string>& trace_paths,
                                            const std::vector<Header>& in_memory,
                                            const std::vector<std::string>& search_dirs, std::string& cwd);
// True when a compile of `source` with `in_memory` headers and effective `nvrtc_options` can read
// no file record_dependencies would record: every -I directory is a toolkit one, no option
// includes a file, and the source and every in-memory header include only "#include <name>"
// (relative, no ".."). Then NVRTC's header trace is not needed to cache the result. Pure but for
// the toolkit search.
bool reads_only_toolkit_headers(std::string_view source, const std::vector<Header>& in_memory,
                                const std::vector<std::string>& nvrtc_options);
// The -I directories of effective options (all absolute, "-I<dir>"), in order.
std::vector<std::string> include_search_dirs(const std::vector<std::string>& nvrtc_options);
// True when every dependency still has the recorded contents (stat first; the contents are
// hashed again when size or mtime differ, or the mtime is too close to the record time to trust)
// and every absence is still absent (ENOENT or ENOTDIR).
bool dependencies_unchanged(const CacheRecord& record);

// Entry files: magic, payload length, XXH3-128 of the payload, payload (key first).
std::string serialize_record(const std::string& key, const CacheRecord& record);
// nullopt for anything truncated, corrupted, of another format, or for another key, and for a
// record time before 1970 (no record jitbridge writes has one; time arithmetic on it could overflow).
std::optional<CacheRecord> parse_record(std::string_view bytes, const std::string& key);

std::int64_t now_ns();

class CacheLock;  // cache_lock.hpp

// A file's modification time in nanoseconds since the epoch, saturated at the int64 limits (a
// file dated past the year 2262 must not overflow the arithmetic).
std::int64_t mtime_ns(const struct stat& st) noexcept;

// An owned file descriptor, closed exactly once whatever path leaves its scope.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) noexcept : fd_(fd) {}
  ~UniqueFd() { close(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  // Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd) noexcept {
    close();
    fd_ = fd;
  }
  // Closes now; returns close(2)'s result (0 when there was nothing to close). The descriptor is
  // gone afterwards either way (Linux never leaves it open after a failed close).
  int close() noexcept {
    if (fd_ < 0) return 0;
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// Reads a file jitbridge wrote itself (a cache entry, an NVRTC trace) at `path` into `out` without
// ever blocking, reading without bound or following a symlink: it must be a regular file (checked
// with lstat before opening, then with fstat on the descriptor, opened O_RDONLY | O_NONBLOCK |
// O_NOFOLLOW | O_CLOEXEC) owned by the user (or a member of `trust`'s group; nullptr: the effective
// uid alone) of at most `max_bytes` bytes, and at most max_bytes + 1 bytes are ever read (a file
// that grows, or lies about its size, is refused). False for anything else: missing, a symlink,
// FIFO, device or directory, another user's, too big, a read error. The descriptor is closed on
// every path. Never throws except std::bad_alloc.
bool read_entry_file(const std::string& path, std::uint64_t max_bytes, std::string& out,
                     const DirectoryTrust* trust = nullptr);

// Renames the finished temporary file `temp` to `path` (same directory): 0, or the errno that
// stopped it. An empty directory in the entry's place is removed and the rename tried again. An
// ENOENT with `temp` gone and `path` present is 0: an NFS client retransmits a rename whose reply
// was lost, and the server, having done it, answers ENOENT (the entry is in place either way).
int rename_into_place(const std::string& temp, const std::string& path) noexcept;

}  // namespace jitbridge::detail

namespace jitbridge {

class Cache::Impl {
 public:
  explicit Impl(const CacheConfig& config);
  // Memory first, then disk. The Program returned has origin memory_cache or disk_cache. An entry
  // file that is not a regular file of at most kMaxCacheEntryBytes is a miss (store replaces it).
  // The mutex guards only the in-memory state: dependency checks and file reads run without it,
  // so a file that stalls (a FIFO, a slow disk) can never stall other threads' compiles.
  std::shared_ptr<const Program> lookup(const std::string& key);
  // Keeps `record` in memory and, when the disk side is on, writes it atomically (temporary file,
  // then rename; the mutex is not held while writing). A failed or short write removes the
  // temporary file; only errors that say the directory itself is unusable turn the disk side off.
  void store(const std::string& key, detail::CacheRecord record);
  // Before compiling `key` after a miss: with the disk side on, takes the key's lock file, or waits
  // while another process (or thread) holds it (docs/DESIGN.md, "Cache"). Returns the program that
  // holder stored (origin memory_cache or disk_cache), or nullptr: compile, then store and
  // turn.release(true) when `turn` is held (a turn released unstored tells the waiters to compile
  // on their own). Disk off or unusable, no lock file possible or a timeout: nullptr with `turn` not
  // held (compile alone, as without the lock). May give the "unusable directory" warning.
  std::shared_ptr<const Program> take_turn(const std::string& key, detail::CacheLock& turn);
  // Counted in info(): a compile() or link() miss about to run NVRTC or nvJitLink.
  void count_compile() noexcept { compiles_.fetch_add(1, std::memory_order_relaxed); }
  void count_link() noexcept { links_.fetch_add(1, std::memory_order_relaxed); }
  // May run the directory check (not making the directory) and give its warning.
  CacheInfo info();
  std::uint64_t clear();
  // Gives the memory entry of `key` `request` when its program has none (a disk hit: the disk
  // record keeps no request), so that later hits share it instead of copying the program.
  void adopt_request(const std::string& key, const std::shared_ptr<const CompileRequest>& request);

 private:
  std::string entry_path(const std::string& key) const;
  std::string lock_path(const std::string& key) const;
  // Mutex held for both. ensure_directory is false when the disk side is off; the first time it
  // runs it checks the directory (check_private_directory, on the directory and its v1/; `create`:
  // making what is missing) and, when it is unsafe or unusable, turns the disk off and fills
  // `warning`. Without `create`, a directory not made yet is true but not marked checked.
  // disable_disk keeps `why` as the reason and returns the warning to give (empty when the disk
  // side was already off). Warnings are given after the mutex is released (a handler may compile).
  bool ensure_directory(std::string& warning, bool create = true);
  std::string disable_disk(const std::string& why);
  void write_entry(const std::string& key, const detail::CacheRecord& record);
  void evict_if_needed(const std::string& keep);
  void remember(const std::string& key, detail::CacheRecord record);  // mutex held

  CacheConfig config_;
  std::string entries_dir_;  // <directory>/v1
  // Whose entries and lock files are loaded: the user's, or also config_.trust_group's members.
  // Set in the constructor, then read-only. trust_error_: the trusted group does not exist.
  detail::DirectoryTrust trust_;
  std::string trust_error_;
  mutable std::mutex mutex_;
  // Guarded by mutex_:
  bool disk_ok_;
  bool dir_checked_ = false;
  std::string disk_reason_;  // why disk_ok_ turned false
  // Records are shared and immutable: a lookup takes one out under the mutex and checks its
  // dependencies after letting go of it.
  std::unordered_map<std::string, std::shared_ptr<const detail::CacheRecord>> memory_;
  std::atomic<std::uint64_t> compiles_{0}, links_{0}, lock_waits_{0}, lock_timeouts_{0};
};

}  // namespace jitbridge
