// pch.cpp — the process's precompiled headers, made on a background thread for later compiles (DESIGN.md, "Cache").
#include "pch.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <algorithm>
#include <atomic>
#include <map>

#include "cache_internal.hpp"
#include "cache_lock.hpp"
#include "jit_internal.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/nvrtc_api.hpp"
#include "nvrtc_program.hpp"

namespace jitbridge::detail {

enum class PchState { seen, ready, failed };

struct PchEntry {
  std::string key, file;
  PchState state = PchState::seen;  // guarded by the registry mutex
  // Set once before state becomes ready, read-only afterwards:
  std::vector<std::string> headers;  // what making it read (NVRTC's trace of that compile)
  CacheRecord deps;                  // their identity then, checked before each use
  std::uint64_t bytes = 0;
  std::uint64_t last_use = 0;  // guarded by the registry mutex
};

namespace {

// A PCH pays for itself only on programs whose headers take a while to parse: cub's block_reduce.cuh
// (1.1-1.5 s plain, 0.2-0.3x with its PCH), not cuda_bf16.h alone (33 ms, 0.7x). Making one costs
// about 1.3-1.5 plain compiles, paid by the second compile with the prefix.
constexpr std::int64_t kDefaultMinCompileNs = 200'000'000;
constexpr std::size_t kMaxReady = 4;                 // cub's PCH is 178 MB
constexpr std::uint64_t kMaxReadyBytes = 1ull << 30;
constexpr std::size_t kMaxEntries = 256;             // seen and failed ones are small
constexpr std::size_t kMaxHeapBytes = 2ull << 30;    // NVRTC's PCH heap is 256 MiB by default
// In each PCH directory: the lock its process holds while it lives (pch_remove_orphans).
constexpr const char* kOwnerLock = "owner.lock";
// A directory without a usable lock is judged by its PID alone only once untouched this long: its owner may be
// between making it and taking the lock (microseconds), in a PID namespace where kill() cannot see it.
constexpr std::time_t kUnlockedGraceSeconds = 60;

using Clock = std::chrono::steady_clock;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The PCH options a user may give: automatic mode and its settings (jitbridge manages those) and
// the explicit ones (left to the user, uncached).
bool user_automatic_option(std::string_view o) {
  return o == "-pch" || o == "--pch" || starts_with(o, "-pch-dir") || starts_with(o, "--pch-dir") ||
         starts_with(o, "-pch-verbose") || starts_with(o, "--pch-verbose") || starts_with(o, "-pch-messages") ||
         starts_with(o, "--pch-messages");
}
bool user_explicit_option(std::string_view o) {
  return starts_with(o, "-create-pch") || starts_with(o, "--create-pch") || starts_with(o, "-use-pch") ||
         starts_with(o, "--use-pch");
}

// `options` without the automatic-mode options (and the value after a bare -pch-dir).
std::vector<std::string> without_automatic(const std::vector<std::string>& options) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const std::string& o = options[i];
    if (!user_automatic_option(o)) out.push_back(o);
    else if ((o == "-pch-dir" || o == "--pch-dir") && i + 1 < options.size()) ++i;
  }
  return out;
}

struct Registry {
  std::mutex mutex;  // guards everything below but `heap`
  std::map<std::string, std::shared_ptr<PchEntry>> entries;
  std::string dir;  // private to this process, made on first need, removed at exit
  pid_t owner = 0;  // the process that made `dir` (a forked child leaves it alone at its exit)
  // The flock on `dir`'s kOwnerLock, taken when `dir` is made and never released: the kernel drops it when this
  // process (and any child forked since, which shares it) is gone, however it ends. Never destroyed (nor is the
  // registry), so never unlocked by hand.
  CacheLock dir_lock;
  bool dir_failed = false;
  std::string warning;  // to give once no lock is held (PchStep::finish): the directory was refused
  std::uint64_t tick = 0, files = 0;
  PchStats stats;
  bool enabled = true;
  std::int64_t min_ns = kDefaultMinCompileNs;
  // Held around every NVRTC compile that makes or uses a PCH (the heap is one per process), and
  // while PCH files are removed. Taken before `mutex`, never while holding it.
  std::mutex heap;

  Registry() { configure(-1, -1); }
  void configure(std::int64_t min_compile_ns, int on) {
    const char* v = std::getenv("JITBRIDGE_PCH");
    std::lock_guard<std::mutex> lock(mutex);
    enabled = on < 0 ? !(v && std::string_view(v) == "0") : on != 0;
    min_ns = min_compile_ns < 0 ? kDefaultMinCompileNs : min_compile_ns;
  }
};

Registry& registry() {
  static Registry* r = new Registry;  // lives until exit (an atexit hook removes the files)
  return *r;
}

// Whether the directory at `dir` holds nothing but its lock file.
bool only_lock_left(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  bool only = true;
  while (dirent* e = ::readdir(d)) {
    const char* name = e->d_name;
    if (std::strcmp(name, ".") != 0 && std::strcmp(name, "..") != 0 && std::strcmp(name, kOwnerLock) != 0) only = false;
  }
  ::closedir(d);
  return only;
}

// At exit: the PCH files and their directory go; the lock file too unless a child forked meanwhile made files there
// (it shares the lock, so the directory stays locked until the child ends).
void remove_files() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.dir.empty() || r.owner != ::getpid()) return;
  for (auto& [key, e] : r.entries)
    if (!e->file.empty()) ::unlink(e->file.c_str());
  if (only_lock_left(r.dir)) ::unlink((r.dir + "/" + kOwnerLock).c_str());
  ::rmdir(r.dir.c_str());
}

// Makes the private directory if there is none yet (mutex held). False when there is none.
bool make_dir_locked(Registry& r) {
  if (r.dir.empty()) {
    if (r.dir_failed) return false;
    const char* env = std::getenv("TMPDIR");
    const std::string tmp = env && *env ? env : "/tmp";
    std::string templ = fmt::format("{}/jitbridge-pch-{}-XXXXXX", tmp, ::getpid());
    if (!::mkdtemp(templ.data())) {
      r.dir_failed = true;
      return false;
    }
    if (const DirectoryCheck check = check_private_directory(templ); !check.ok) {
      ::rmdir(templ.c_str());
      r.dir_failed = true;
      r.warning = fmt::format("precompiled headers cannot be kept in {}: {}; compiling without them", tmp,
                              refusal_reason(check, "TMPDIR"));
      return false;
    }
    // Before the sweep (which then finds this directory locked). Not held on a filesystem without flock: the
    // directory is then judged as one without a lock.
    r.dir_lock.try_lock(templ + "/" + kOwnerLock);
    pch_remove_orphans(tmp);  // only under a $TMPDIR the check accepted (nobody else renames things in it)
    r.dir = templ;
    r.owner = ::getpid();
    std::atexit(remove_files);
  }
  return true;
}

// A new file name in the private directory (mutex held); "" when there is no directory.
std::string new_file_locked(Registry& r) {
  if (!make_dir_locked(r)) return {};
  return fmt::format("{}/p{}.pch", r.dir, r.files++);
}

// Removes `e` from the map (or, `keep_failed`, marks it failed) and its file from disk. Caller
// holds `heap` (nobody reads the file).
void drop_locked(Registry& r, const std::shared_ptr<PchEntry>& e, bool keep_failed = false) {
  std::string file;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.entries.find(e->key);
    if (it == r.entries.end() || it->second != e) return;
    if (e->state == PchState::ready) ++r.stats.dropped;
    if (keep_failed) e->state = PchState::failed;
    else r.entries.erase(it);
    file = e->file;
  }
  if (!file.empty()) ::unlink(file.c_str());
}

// The ready entries beyond the bounds go, least recently used first. Caller holds `heap`.
void evict_locked(Registry& r) {
  std::vector<std::shared_ptr<PchEntry>> out;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    std::vector<std::shared_ptr<PchEntry>> ready;
    std::uint64_t bytes = 0;
    for (auto& [key, e] : r.entries)
      if (e->state == PchState::ready) {
        ready.push_back(e);
        bytes += e->bytes;
      }
    std::sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) { return a->last_use < b->last_use; });
    for (std::size_t i = 0; i < ready.size() && (ready.size() - i > kMaxReady || bytes > kMaxReadyBytes); ++i) {
      bytes -= ready[i]->bytes;
      out.push_back(ready[i]);
    }
  }
  for (const auto& e : out) drop_locked(r, e);
}

// Makes the PCH of `e` from `prefix` alone under `options` (`heap` held by the caller). True when
// it is ready.
bool make_locked(Registry& r, const std::shared_ptr<PchEntry>& e, const std::string& prefix,
                 const std::string& program_name, const std::vector<Header>& in_memory,
                 const std::vector<std::string>& options) {
  const NvrtcApi& api = nvrtc_api();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    e->file = new_file_locked(r);
    if (e->file.empty()) {
      e->state = PchState::failed;
      return false;
    }
  }
  bool ok = false;
  std::vector<std::string> headers;
  try {
    for (int attempt = 0; attempt < 2 && !ok; ++attempt) {
      NvrtcProgram prog(prefix, program_name, in_memory);
      const std::string trace = e->file + ".trace";  // NVRTC writes <trace>.json
      std::vector<std::string> opts = options;
      opts.push_back("--fdevice-time-trace=" + trace);
      opts.push_back("-create-pch=" + e->file);
      opts.push_back("-pch-messages=false");
      opts.push_back("-pch-verbose=false");
      const bool compiled = prog.compile(opts);
      const nvrtcResult status = prog.pch_create_status();
      std::string log = prog.log(), rest, json;
      const bool traced = read_entry_file(trace + ".json", kMaxReadFileBytes, json);  // the user's own, not followed
      ::unlink((trace + ".json").c_str());
      if (!compiled) {
        // NVRTC 13.0 keeps a failed traced compile's trace and writes it as ./.json during the thread's
        // next untraced compile (docs/DESIGN.md, "NVRTC quirk"): a traced throwaway compile takes it here.
        NvrtcProgram flush("", "flush.cu", {});
        flush.compile({"--fdevice-time-trace=" + trace, "-arch=compute_75"});
        ::unlink((trace + ".json").c_str());
      }
      if (status == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED && attempt == 0) {
        const std::size_t need = prog.pch_heap_required();
        if (need == 0 || need > kMaxHeapBytes) break;
        // A new heap makes every PCH made so far unusable: drop them all, then try again.
        std::vector<std::shared_ptr<PchEntry>> all;
        {
          std::lock_guard<std::mutex> lock(r.mutex);
          for (auto& [key, other] : r.entries)
            if (other->state == PchState::ready) all.push_back(other);
        }
        for (const auto& other : all) drop_locked(r, other);
        if (api.nvrtcSetPCHHeapSize(need) != NVRTC_SUCCESS) break;
        continue;
      }
      parse_ptxas_info(log, &rest);
      // Diagnostics from the headers would vanish from the logs of compiles that use the PCH.
      const bool quiet = rest.find_first_not_of(" \t\r\n") == std::string::npos;
      if (!compiled || status != NVRTC_SUCCESS || !quiet || !traced) break;
      headers = trace_headers(json);
      struct stat st;
      if (::stat(e->file.c_str(), &st) != 0) break;
      e->bytes = static_cast<std::uint64_t>(st.st_size);
      ok = true;
    }
    if (ok) {
      e->headers = headers;
      e->deps.recorded_ns = now_ns();
      e->deps.deps = record_dependencies(headers, in_memory, include_search_dirs(options), e->deps.cwd);
    }
  } catch (const std::exception&) {
    ok = false;  // a malformed trace, NVRTC failing: compile without
  }
  if (!ok) ::unlink(e->file.c_str());
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    e->state = ok ? PchState::ready : PchState::failed;
    e->last_use = ++r.tick;
    ++(ok ? r.stats.created : r.stats.failed);
  }
  if (ok) evict_locked(r);
  return ok;
}

// Whether the directory open as `fd` (at `dir`, named after process `pid`; `st` its fstat) is an orphan: its
// process is gone. The lock its owner holds for its life decides: a PID can be reused by another process (an orphan
// would look alive) or belong to another PID namespace sharing this $TMPDIR (a live owner would look gone). The lock
// is tried only once its file has text, which its owner writes after taking it, so a sweep never takes it first
// from an owner about to. On true, `lock` may hold it, to keep until the directory is removed.
bool orphaned(int fd, const std::string& dir, long pid, const struct stat& st, CacheLock& lock) {
  const UniqueFd lock_file(::openat(fd, kOwnerLock, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  char first;
  if (lock_file && ::pread(lock_file.get(), &first, 1, 0) == 1) {
    switch (lock.try_lock(dir + "/" + kOwnerLock)) {
      case CacheLock::Try::held: return true;    // the kernel dropped its owner's lock: the owner is gone
      case CacheLock::Try::busy: return false;   // its owner (or a child it forked) lives, or a sweep removes it
      case CacheLock::Try::unavailable: break;   // no flock here: judged as without a lock
    }
  }
  // No lock: a directory of a version before the lock, one whose owner has not taken it yet or could not (a
  // filesystem without flock).
  if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) return false;  // alive, or not ours to judge
  return std::time(nullptr) - st.st_mtime >= kUnlockedGraceSeconds;
}

}  // namespace

void pch_remove_orphans(const std::string& tmp) {
  DIR* d = ::opendir(tmp.c_str());
  if (!d) return;
  const std::string lead = "jitbridge-pch-";
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, lead.size(), lead) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + lead.size(), &end, 10);
    if (pid <= 0 || !end || *end != '-') continue;
    const std::string dir = tmp + "/" + name;
    // Opened without following a symlink and judged by what was opened: files are removed only from a
    // directory of this user's, whatever is renamed meanwhile.
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    CacheLock lock;  // released once the directory is gone (its file unlinked with the rest)
    if (::fstat(fd, &st) != 0 || st.st_uid != ::getuid() || !orphaned(fd, dir, pid, st, lock)) {
      ::close(fd);
      continue;
    }
    if (DIR* inner = ::fdopendir(fd)) {  // owns fd from here
      while (dirent* f = ::readdir(inner))
        if (std::strcmp(f->d_name, ".") != 0 && std::strcmp(f->d_name, "..") != 0) ::unlinkat(fd, f->d_name, 0);
      ::closedir(inner);
    } else {
      ::close(fd);
    }
    ::rmdir(dir.c_str());
  }
  ::closedir(d);
}

std::string_view pch_prefix(std::string_view s) {
  std::size_t pos = 0, end = 0;
  while (pos < s.size()) {
    const char c = s[pos];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
      ++pos;
    } else if (starts_with(s.substr(pos), "//")) {
      const std::size_t nl = s.find('\n', pos);
      if (nl == std::string_view::npos || s[nl - 1] == '\\') break;
      pos = nl + 1;
    } else if (starts_with(s.substr(pos), "/*")) {
      const std::size_t close = s.find("*/", pos + 2);
      if (close == std::string_view::npos) break;
      pos = close + 2;
    } else if (c == '#') {
      std::size_t line_end = pos;  // the newline ending the directive, continuations included
      while (line_end < s.size() && !(s[line_end] == '\n' && s[line_end - 1] != '\\')) ++line_end;
      const std::string_view directive = s.substr(pos, line_end - pos);
      if (directive.find("/*") != std::string_view::npos) break;  // a comment that may run past the line
      std::size_t name = 1;
      while (name < directive.size() && (directive[name] == ' ' || directive[name] == '\t')) ++name;
      std::size_t name_end = name;
      while (name_end < directive.size() && std::isalpha(static_cast<unsigned char>(directive[name_end]))) ++name_end;
      const std::string_view word = directive.substr(name, name_end - name);
      pos = line_end < s.size() ? line_end + 1 : line_end;
      if (word == "include") end = pos;
      else if (word != "define" && word != "undef" && word != "pragma") break;
    } else {
      break;
    }
  }
  return s.substr(0, end);
}

bool pch_cacheable(const std::vector<std::string>& nvrtc_options) {
  for (const std::string& o : nvrtc_options)
    if (user_explicit_option(o)) return false;
  return true;
}

PchStep::PchStep(std::string_view source, const CompileOptions& options, const std::vector<std::string>& nvrtc_options,
                 bool traced)
    : start_(Clock::now()) {
  Registry& r = registry();
  bool automatic = false;
  for (const std::string& o : nvrtc_options) {
    if (user_explicit_option(o)) {  // the user's own PCH files: still one such compile at a time
      held_ = std::unique_lock<std::mutex>(r.heap);
      return;
    }
    automatic = automatic || o == "-pch" || o == "--pch";
  }
  user_pch_ = automatic;  // taken out of NVRTC's options whether or not a PCH is used
  const NvrtcApi& api = nvrtc_api();
  if (!traced || !api.nvrtcGetPCHCreateStatus || !api.nvrtcSetPCHHeapSize || !api.nvrtcGetPCHHeapSizeRequired) return;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.enabled && !automatic) return;
  }
  const std::string_view prefix = pch_prefix(source);
  if (prefix.empty()) return;
  options_ = without_automatic(nvrtc_options);
  Hasher h;
  h.field("jitbridge-pch-1").field(nvrtc_identity()).field(options.program_name).field(prefix);
  h.field(static_cast<std::uint64_t>(options_.size()));
  for (const std::string& o : options_) h.field(o);
  h.field(static_cast<std::uint64_t>(options.headers.size()));
  for (const Header& hd : options.headers) h.field(hd.name).field(hd.text);
  key_ = h.hex();

  // NVRTC 13.0 runs one compile at a time per process anyway: waiting for the lock costs nothing
  // that compiling plain would not.
  std::unique_lock<std::mutex> heap(r.heap);
  std::shared_ptr<PchEntry> entry;
  bool make = false;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.entries.find(key_);
    if (it == r.entries.end()) {
      candidate_ = true;
      make = automatic;  // -pch: made by the first compile, as NVRTC's own -pch does
      if (make) {
        if (r.entries.size() >= kMaxEntries) return;
        entry = std::make_shared<PchEntry>();
        entry->key = key_;
        r.entries[key_] = entry;
      }
    } else if (it->second->state != PchState::failed) {
      entry = it->second;
      make = entry->state == PchState::seen;  // the second compile with this prefix makes it
    }
  }
  if (!entry) return;
  if (make) {
    candidate_ = false;
    if (!make_locked(r, entry, std::string(prefix), options.program_name, options.headers, options_)) return;
  } else if (!dependencies_unchanged(entry->deps)) {  // a header it holds changed: plain, then again
    drop_locked(r, entry);
    candidate_ = true;
  }
  if (candidate_) return;
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.entries.find(key_);
  if (it == r.entries.end() || it->second != entry || entry->state != PchState::ready) return;
  entry->last_use = ++r.tick;
  use_ = std::move(entry);
  held_ = std::move(heap);
}

PchStep::~PchStep() = default;

std::vector<std::string> PchStep::rewrite(std::vector<std::string> options) const {
  if (user_pch_ || use_) options = without_automatic(options);
  if (use_) {
    options.push_back("-use-pch=" + use_->file);
    options.push_back("-pch-messages=false");
    options.push_back("-pch-verbose=false");
  }
  return options;
}

bool PchStep::finish(bool ok, const std::string& log) {
  Registry& r = registry();
  struct GiveWarning {  // at return, with no lock held (a warning handler may compile)
    Registry& r;
    ~GiveWarning() {
      std::string w;
      {
        std::lock_guard<std::mutex> lock(r.mutex);
        w.swap(r.warning);
      }
      if (!w.empty()) warn(w);
    }
  } give_warning{r};
  const std::int64_t elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
  if (use_) {
    if (log.find("precompiled header") != std::string::npos) {  // refused: never let it change a log
      drop_locked(r, use_, /*keep_failed=*/true);
      held_ = {};
      return false;
    }
    std::lock_guard<std::mutex> lock(r.mutex);
    ++r.stats.used;
  }
  held_ = {};
  if (!ok || !candidate_) return true;
  // The first compile with this prefix ran plain; a long one marks the prefix for the next.
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!user_pch_ && (!r.enabled || elapsed < r.min_ns)) return true;
  if (r.entries.count(key_)) return true;
  if (r.entries.size() >= kMaxEntries)
    for (auto it = r.entries.begin(); it != r.entries.end();)
      it = it->second->state != PchState::ready ? r.entries.erase(it) : std::next(it);
  auto e = std::make_shared<PchEntry>();
  e->key = key_;
  r.entries[key_] = std::move(e);
  candidate_ = false;
  return true;
}

std::optional<std::vector<std::string>> PchStep::headers(std::optional<std::vector<std::string>> traced) const {
  if (!use_ || !traced) return traced;
  std::vector<std::string> out = use_->headers;
  for (std::string& h : *traced)
    if (std::find(use_->headers.begin(), use_->headers.end(), h) == use_->headers.end()) out.push_back(std::move(h));
  return out;
}

PchStats pch_stats() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  PchStats s = r.stats;
  s.ready = 0;
  for (const auto& [key, e] : r.entries) s.ready += e->state == PchState::ready;
  return s;
}

void pch_configure(std::int64_t min_compile_ns, int enabled) { registry().configure(min_compile_ns, enabled); }

std::string pch_directory() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return make_dir_locked(r) ? r.dir : std::string();
}

void pch_reset() {
  Registry& r = registry();
  std::lock_guard<std::mutex> heap(r.heap);
  std::vector<std::shared_ptr<PchEntry>> all;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto& [key, e] : r.entries) all.push_back(e);
  }
  for (const auto& e : all) drop_locked(r, e);
}

}  // namespace jitbridge::detail
