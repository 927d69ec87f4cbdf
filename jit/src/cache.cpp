// cache.cpp — the memory + disk cache of compiled programs (see docs/DESIGN.md, "Cache").
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "cache_internal.hpp"
#include "cache_lock.hpp"
#include "jit_internal.hpp"
#include "jitbridge/checked.hpp"

namespace jitbridge {
namespace {

constexpr const char* kSuffix = ".jbc";
constexpr const char* kTempPrefix = ".tmp-";
constexpr const char* kLockSuffix = ".lock";  // beside <key>.jbc (cache_lock.hpp)

std::mutex& warning_mutex() {
  static std::mutex m;
  return m;
}
std::function<void(const std::string&)>& warning_handler() {
  static std::function<void(const std::string&)> h;
  return h;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

struct DiskEntry {
  std::string path;
  std::uint64_t bytes;  // 0 for what is not a regular file
  std::int64_t mtime_ns;
};

// Entries in `dir` (never following symlinks): every *.jbc that is not a directory, so that
// eviction and clear() also remove FIFOs and symlinks left where entries should be. Temporary
// files left by writers that died over an hour ago are removed, and lock files untouched for a
// day (a failed compile's "none" would otherwise stay forever; a holder rewrites its file when
// it takes it, so none in use is that old, and removing one costs at most one compile more).
std::vector<DiskEntry> list_entries(const std::string& dir) {
  std::vector<DiskEntry> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  const std::int64_t stale = detail::now_ns() - 3600LL * 1'000'000'000;
  const std::int64_t stale_lock = detail::now_ns() - 24 * 3600LL * 1'000'000'000;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
    const std::int64_t mtime = detail::mtime_ns(st);
    if (name.rfind(kTempPrefix, 0) == 0) {
      if (mtime < stale) ::unlink(path.c_str());
      continue;
    }
    if (ends_with(name, kLockSuffix)) {
      if (mtime < stale_lock && S_ISREG(st.st_mode)) ::unlink(path.c_str());
      continue;
    }
    const std::uint64_t bytes = S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0;
    if (ends_with(name, kSuffix) && name.size() > 4) out.push_back({path, bytes, mtime});
  }
  ::closedir(d);
  return out;
}

// Removes the lock file beside entry `entry_path` (<key>.jbc -> <key>.lock). A process holding it
// keeps its lock on the unlinked file, so one starting now may compile the same key beside it:
// one compile more, never a wrong entry (entries are renamed into place whole).
void remove_lock_of(const std::string& entry_path) {
  const std::size_t n = std::char_traits<char>::length(kSuffix);
  if (entry_path.size() <= n) return;
  ::unlink((entry_path.substr(0, entry_path.size() - n) + kLockSuffix).c_str());
}

// Errors writing or renaming one entry that say nothing about the directory: skip that entry.
// ESTALE: an NFS handle another host made stale (the directory replaced under us); the next store tries afresh.
bool entry_only_error(int err) {
  return err == ENOSPC || err == EDQUOT || err == EFBIG || err == EISDIR || err == ENOTEMPTY || err == EEXIST ||
         err == ESTALE;
}

}  // namespace

namespace detail {

std::int64_t mtime_ns(const struct stat& st) noexcept {
  std::int64_t ns = 0;
  if (checked::mul(static_cast<std::int64_t>(st.st_mtim.tv_sec), std::int64_t{1'000'000'000}, ns) &&
      checked::add(ns, static_cast<std::int64_t>(st.st_mtim.tv_nsec), ns))
    return ns;
  return st.st_mtim.tv_sec < 0 ? INT64_MIN : INT64_MAX;
}

bool read_entry_file(const std::string& path, std::uint64_t max_bytes, std::string& out, const DirectoryTrust* trust) {
  struct stat st;
  // lstat first: a FIFO, device or symlink is never even opened (opening some devices acts).
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  // The owner from the descriptor (the name may have been replaced between lstat and open);
  // read_regular_file fstats again for the type and size.
  if (!fd || ::fstat(fd.get(), &st) != 0) return false;
  if (trust ? !trust->owner_ok(st.st_uid) : st.st_uid != ::geteuid()) return false;
  return read_regular_file(fd.get(), max_bytes, out);
}

}  // namespace detail

void set_warning_handler(std::function<void(const std::string&)> handler) {
  std::lock_guard<std::mutex> lock(warning_mutex());
  warning_handler() = std::move(handler);
}

void warn(const std::string& message) noexcept {
  try {
    std::function<void(const std::string&)> h;
    {
      std::lock_guard<std::mutex> lock(warning_mutex());
      h = warning_handler();
    }
    if (h) h(message);
    else std::fprintf(stderr, "jitbridge: warning: %s\n", message.c_str());
  } catch (...) {
    // A warning must never take the caller down.
  }
}

CacheConfig CacheConfig::from_environment() {
  CacheConfig c;
  if (const char* v = std::getenv("JITBRIDGE_CACHE"); v && std::string(v) == "0") c.disk = false;
  if (const char* v = std::getenv("JITBRIDGE_CACHE_DIR"); v && *v) {
    c.directory = v;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg && xdg[0] == '/') {
    c.directory = std::string(xdg) + "/jitbridge";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    c.directory = std::string(home) + "/.cache/jitbridge";
  } else {
    c.disk = false;
  }
  if (const char* v = std::getenv("JITBRIDGE_CACHE_TRUST_GROUP"); v && *v) c.trust_group = v;
  if (const char* v = std::getenv("JITBRIDGE_CACHE_MAX_BYTES"); v && *v) {
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (end && *end == '\0' && n > 0) c.max_bytes = n;
    else warn(fmt::format("JITBRIDGE_CACHE_MAX_BYTES='{}' is not a positive integer; using {}", v, c.max_bytes));
  }
  if (const char* v = std::getenv("JITBRIDGE_CACHE_LOCK_TIMEOUT"); v && *v) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end && end != v && *end == '\0' && s >= 0 && s <= 1e9) c.lock_timeout_s = s;  // also refuses nan
    else
      warn(fmt::format("JITBRIDGE_CACHE_LOCK_TIMEOUT='{}' is not a number of seconds from 0 to 1e9; using {}", v,
                       c.lock_timeout_s));
  }
  return c;
}

Cache::Cache(CacheConfig config) : config_(std::move(config)), impl_(std::make_unique<Impl>(config_)) {}
Cache::~Cache() = default;

Cache& Cache::global() {
  static Cache* cache = new Cache(CacheConfig::from_environment());  // lives until exit, never torn down
  return *cache;
}

CacheInfo Cache::info() const { return impl_->info(); }
std::uint64_t Cache::clear() { return impl_->clear(); }

Cache::Impl::Impl(const CacheConfig& config)
    : config_(config), entries_dir_(config.directory + "/v1"), disk_ok_(config.disk && !config.directory.empty()) {
  if (!config_.disk) disk_reason_ = "turned off (JITBRIDGE_CACHE=0)";
  else if (config_.directory.empty()) disk_reason_ = "no directory (neither JITBRIDGE_CACHE_DIR nor HOME is set)";
  if (!config_.trust_group.empty()) {
    if (std::optional<detail::DirectoryTrust> t = detail::DirectoryTrust::of_group(config_.trust_group, trust_error_))
      trust_ = std::move(*t);
  }
}

std::string Cache::Impl::entry_path(const std::string& key) const {
  return entries_dir_ + "/" + key + kSuffix;
}

std::string Cache::Impl::lock_path(const std::string& key) const {
  return entries_dir_ + "/" + key + kLockSuffix;
}

std::string Cache::Impl::disable_disk(const std::string& why) {
  if (!disk_ok_) return {};
  disk_ok_ = false;
  disk_reason_ = why;
  return fmt::format("kernel cache directory {} is unusable: {}; caching in memory only", config_.directory, why);
}

bool Cache::Impl::ensure_directory(std::string& warning, bool create) {
  if (!disk_ok_) return false;
  if (dir_checked_) return true;
  if (!trust_error_.empty()) {
    dir_checked_ = true;
    warning = disable_disk(fmt::format("JITBRIDGE_CACHE_TRUST_GROUP={}; fix: name an existing group, or unset it",
                                       trust_error_));
    return false;
  }
  // v1/ and the directory holding it: both private (the directory not only as v1/'s ancestor). One
  // walk when making what is missing; without, the directory first (v1/ may not be there yet).
  detail::DirectoryCheck check;
  if (!create) check = detail::check_private_directory(config_.directory, trust_, false);
  if (create || (check.ok && check.exists)) check = detail::check_private_directory(entries_dir_, trust_, create, 2);
  if (!check.ok) {
    dir_checked_ = true;
    warning = disable_disk(detail::refusal_reason(check, "JITBRIDGE_CACHE_DIR"));
    return false;
  }
  if (!check.exists) return true;  // not made yet (create false): nothing in it to trust or distrust
  dir_checked_ = true;
  if (::access(entries_dir_.c_str(), W_OK | X_OK) == 0) return true;
  warning = disable_disk(std::strerror(errno));
  return false;
}

void Cache::Impl::remember(const std::string& key, detail::CacheRecord record) {
  if (record.program->origin != Origin::memory_cache) {
    auto copy = std::make_shared<Program>(*record.program);
    copy->origin = Origin::memory_cache;
    record.program = std::move(copy);
  }
  memory_[key] = std::make_shared<const detail::CacheRecord>(std::move(record));
}

std::shared_ptr<const Program> Cache::Impl::lookup(const std::string& key) {
  std::shared_ptr<const detail::CacheRecord> held;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) held = it->second;
  }
  if (held) {
    if (detail::dependencies_unchanged(*held)) return held->program;
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end() && it->second == held) memory_.erase(it);
  }
  std::string warning;
  bool disk = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disk = ensure_directory(warning);  // checked once per Cache: later lookups pay two flag tests
  }
  if (!warning.empty()) warn(warning);  // never with the mutex held: the handler may compile
  if (!disk) return nullptr;
  const std::string path = entry_path(key);
  std::string bytes;
  if (!detail::read_entry_file(path, kMaxCacheEntryBytes, bytes, &trust_)) return nullptr;
  std::optional<detail::CacheRecord> record = detail::parse_record(bytes, key);
  if (!record || !detail::dependencies_unchanged(*record)) return nullptr;  // replaced after compiling
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // recently used: last to be evicted
  std::shared_ptr<const Program> program = record->program;
  std::lock_guard<std::mutex> lock(mutex_);
  remember(key, std::move(*record));
  return program;
}

std::shared_ptr<const Program> Cache::Impl::take_turn(const std::string& key, detail::CacheLock& turn) {
  std::string warning;
  bool disk = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disk = ensure_directory(warning);
  }
  if (!warning.empty()) warn(warning);  // never with the mutex held: the handler may compile
  if (!disk) return nullptr;
  std::shared_ptr<const Program> found;
  bool waited = false;
  const detail::Turn t = detail::take_turn(
      lock_path(key), config_.lock_timeout_s, [&] { return (found = lookup(key)) != nullptr; }, turn, &waited,
      &trust_);
  if (waited) lock_waits_.fetch_add(1, std::memory_order_relaxed);
  if (t == detail::Turn::timed_out) lock_timeouts_.fetch_add(1, std::memory_order_relaxed);
  return t == detail::Turn::ready ? found : nullptr;
}

void Cache::Impl::store(const std::string& key, detail::CacheRecord record) {
  std::string warning;
  bool write = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    write = ensure_directory(warning);
    if (!write) remember(key, std::move(record));
  }
  if (!warning.empty()) warn(warning);  // never with the mutex held: the handler may compile
  if (!write) return;
  write_entry(key, record);
  std::lock_guard<std::mutex> lock(mutex_);
  remember(key, std::move(record));
}

void Cache::Impl::write_entry(const std::string& key, const detail::CacheRecord& record) {
  const std::string bytes = detail::serialize_record(key, record);
  // An entry over the disk budget would evict everything else and itself; one over the read cap
  // would never be read.
  if (bytes.size() > config_.max_bytes || bytes.size() > kMaxCacheEntryBytes) return;
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string temp = fmt::format("{}/{}{}-{:016x}", entries_dir_, kTempPrefix, ::getpid(), rng());
  const std::string path = entry_path(key);
  int err = 0;
  {
    // O_EXCL (and O_NOFOLLOW, for clarity): a fresh file of ours, never something planted in its place.
    detail::UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) err = errno;
    // A shared cache (trusted group): the other members read it; the umask must not decide that.
    if (fd && trust_.group && ::fchmod(fd.get(), 0640) != 0) err = errno;
    std::size_t done = 0;
    while (fd && done < bytes.size() && err == 0) {
      const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
      if (n > 0) done += static_cast<std::size_t>(n);
      else if (n < 0 && errno != EINTR) err = errno;
      else if (n == 0) err = ENOSPC;  // no progress: as good as full
    }
    if (fd.close() != 0 && err == 0) err = errno;  // NFS reports a full disk at close
  }
  if (err == 0) err = detail::rename_into_place(temp, path);
  if (err != 0) {
    ::unlink(temp.c_str());
    // A full disk, a file size limit or something in the entry's place is not a broken directory:
    // skip this entry and keep trying later ones.
    if (entry_only_error(err)) return;
    std::string warning;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      warning = disable_disk(std::strerror(err));
    }
    if (!warning.empty()) warn(warning);
    return;
  }
  evict_if_needed(path);
}

void Cache::Impl::evict_if_needed(const std::string& keep) {
  std::vector<DiskEntry> entries = list_entries(entries_dir_);
  std::uint64_t total = 0;
  for (const DiskEntry& e : entries) total = checked::add_saturated(total, e.bytes);
  if (total <= config_.max_bytes) return;
  std::sort(entries.begin(), entries.end(),
            [](const DiskEntry& a, const DiskEntry& b) { return a.mtime_ns < b.mtime_ns; });
  for (const DiskEntry& e : entries) {
    if (total <= config_.max_bytes) break;
    if (e.path == keep) continue;
    if (::unlink(e.path.c_str()) == 0 || errno == ENOENT) total -= e.bytes;
    remove_lock_of(e.path);
  }
}

void Cache::Impl::adopt_request(const std::string& key, const std::shared_ptr<const CompileRequest>& request) {
  std::shared_ptr<const detail::CacheRecord> held;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end() && !it->second->program->request) held = it->second;
  }
  if (!held) return;
  auto record = std::make_shared<detail::CacheRecord>(*held);  // copied without the mutex: programs can be large
  auto program = std::make_shared<Program>(*record->program);
  program->request = request;
  record->program = std::move(program);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = memory_.find(key); it != memory_.end() && it->second == held) it->second = std::move(record);
}

CacheInfo Cache::Impl::info() {
  CacheInfo out;
  out.directory = config_.directory;
  out.trust_group = config_.trust_group;
  std::string warning;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out.disk = ensure_directory(warning, /*create=*/false);
    out.disk_reason = disk_reason_;
    out.memory_entries = memory_.size();
  }
  if (!warning.empty()) warn(warning);
  out.compiles = compiles_.load(std::memory_order_relaxed);
  out.links = links_.load(std::memory_order_relaxed);
  out.lock_waits = lock_waits_.load(std::memory_order_relaxed);
  out.lock_timeouts = lock_timeouts_.load(std::memory_order_relaxed);
  if (!out.disk) return out;  // an unsafe directory is not even listed
  for (const DiskEntry& e : list_entries(entries_dir_)) {
    ++out.entries;
    out.bytes = checked::add_saturated(out.bytes, e.bytes);
  }
  return out;
}

std::uint64_t Cache::Impl::clear() {
  std::string warning;
  bool disk = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_.clear();
    disk = ensure_directory(warning, /*create=*/false);
  }
  if (!warning.empty()) warn(warning);
  std::uint64_t removed = 0;
  if (!disk) return removed;  // nothing is removed from an unsafe directory
  for (const DiskEntry& e : list_entries(entries_dir_)) {
    if (::unlink(e.path.c_str()) == 0) ++removed;
    remove_lock_of(e.path);
  }
  return removed;
}

}  // namespace jitbridge
