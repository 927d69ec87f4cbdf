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
#include "jit_internal.hpp"

namespace jitbridge {
namespace {

constexpr const char* kSuffix = ".jbc";
constexpr const char* kTempPrefix = ".tmp-";

std::mutex& warning_mutex() {
  static std::mutex m;
  return m;
}
std::function<void(const std::string&)>& warning_handler() {
  static std::function<void(const std::string&)> h;
  return h;
}

bool make_dirs(const std::string& path) {
  for (std::size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

struct DiskEntry {
  std::string path;
  std::uint64_t bytes;
  std::int64_t mtime_ns;
};

// Entries in `dir`; temporary files left by writers that died over an hour ago are removed.
std::vector<DiskEntry> list_entries(const std::string& dir) {
  std::vector<DiskEntry> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  const std::int64_t stale = detail::now_ns() - 3600LL * 1'000'000'000;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    std::int64_t mtime = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    if (name.rfind(kTempPrefix, 0) == 0) {
      if (mtime < stale) ::unlink(path.c_str());
      continue;
    }
    if (name.size() > 4 && name.compare(name.size() - 4, 4, kSuffix) == 0)
      out.push_back({path, static_cast<std::uint64_t>(st.st_size), mtime});
  }
  ::closedir(d);
  return out;
}

}  // namespace

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
  if (const char* v = std::getenv("JITBRIDGE_CACHE_MAX_BYTES"); v && *v) {
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (end && *end == '\0' && n > 0) c.max_bytes = n;
    else warn(fmt::format("JITBRIDGE_CACHE_MAX_BYTES='{}' is not a positive integer; using {}", v, c.max_bytes));
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
    : config_(config), entries_dir_(config.directory + "/v1"), disk_ok_(config.disk && !config.directory.empty()) {}

std::string Cache::Impl::entry_path(const std::string& key) const {
  return entries_dir_ + "/" + key + kSuffix;
}

void Cache::Impl::disable_disk(const std::string& why) {
  if (!disk_ok_) return;
  disk_ok_ = false;
  warn(fmt::format("kernel cache directory {} is unusable ({}); caching in memory only", config_.directory, why));
}

bool Cache::Impl::ensure_directory() {
  if (!disk_ok_) return false;
  if (dir_checked_) return true;
  dir_checked_ = true;
  if (!make_dirs(entries_dir_)) {
    disable_disk(std::strerror(errno));
    return false;
  }
  if (::access(entries_dir_.c_str(), W_OK | X_OK) != 0) {
    disable_disk(std::strerror(errno));
    return false;
  }
  return true;
}

void Cache::Impl::remember(const std::string& key, detail::CacheRecord record) {
  if (record.program->origin != Origin::memory_cache) {
    auto copy = std::make_shared<Program>(*record.program);
    copy->origin = Origin::memory_cache;
    record.program = std::move(copy);
  }
  memory_[key] = std::move(record);
}

std::shared_ptr<const Program> Cache::Impl::lookup(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = memory_.find(key); it != memory_.end()) {
    if (detail::dependencies_unchanged(it->second)) return it->second.program;
    memory_.erase(it);
  }
  if (!disk_ok_) return nullptr;
  const std::string path = entry_path(key);
  std::string bytes;
  if (!detail::read_file(path, bytes)) return nullptr;
  std::optional<detail::CacheRecord> record = detail::parse_record(bytes, key);
  if (!record || !detail::dependencies_unchanged(*record)) return nullptr;  // replaced after compiling
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recently used: last to be evicted
  std::shared_ptr<const Program> program = record->program;
  remember(key, std::move(*record));
  return program;
}

void Cache::Impl::store(const std::string& key, detail::CacheRecord record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ensure_directory()) write_entry(key, record);
  remember(key, std::move(record));
}

void Cache::Impl::write_entry(const std::string& key, const detail::CacheRecord& record) {
  const std::string bytes = detail::serialize_record(key, record);
  if (bytes.size() > config_.max_bytes) return;  // would evict everything else and itself
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string temp = fmt::format("{}/{}{}-{:016x}", entries_dir_, kTempPrefix, ::getpid(), rng());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return disable_disk(std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  bool ok = done == bytes.size() && ::close(fd) == 0;
  if (!ok || ::rename(temp.c_str(), entry_path(key).c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    // A full disk is not a broken directory: skip this entry, keep trying later ones.
    if (err != ENOSPC && err != EDQUOT) disable_disk(std::strerror(err));
    return;
  }
  evict_if_needed(entry_path(key));
}

void Cache::Impl::evict_if_needed(const std::string& keep) {
  std::vector<DiskEntry> entries = list_entries(entries_dir_);
  std::uint64_t total = 0;
  for (const DiskEntry& e : entries) total += e.bytes;
  if (total <= config_.max_bytes) return;
  std::sort(entries.begin(), entries.end(),
            [](const DiskEntry& a, const DiskEntry& b) { return a.mtime_ns < b.mtime_ns; });
  for (const DiskEntry& e : entries) {
    if (total <= config_.max_bytes) break;
    if (e.path == keep) continue;
    if (::unlink(e.path.c_str()) == 0 || errno == ENOENT) total -= e.bytes;
  }
}

CacheInfo Cache::Impl::info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CacheInfo out;
  out.directory = config_.directory;
  out.disk = disk_ok_;
  out.memory_entries = memory_.size();
  for (const DiskEntry& e : list_entries(entries_dir_)) {
    ++out.entries;
    out.bytes += e.bytes;
  }
  return out;
}

std::uint64_t Cache::Impl::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.clear();
  std::uint64_t removed = 0;
  for (const DiskEntry& e : list_entries(entries_dir_))
    if (::unlink(e.path.c_str()) == 0) ++removed;
  return removed;
}

}  // namespace jitbridge
