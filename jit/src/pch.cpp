// pch.cpp — the process's precompiled headers: made on one background thread, used by later compiles (docs/DESIGN.md, "Cache").
#include "pch.hpp"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <thread>

#include "cache_internal.hpp"
#include "jit_internal.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/nvrtc_api.hpp"
#include "nvrtc_program.hpp"

namespace jitbridge::detail {

enum class PchState { making, ready, failed };

struct PchEntry {
  std::string key, file;
  PchState state = PchState::making;  // guarded by the registry mutex
  std::chrono::steady_clock::time_point started;
  std::int64_t plain_ns = 0;  // the plain compile that asked for it
  // Set once before state becomes ready, read-only afterwards:
  std::vector<std::string> headers;  // what making it read (NVRTC's trace of that compile)
  CacheRecord deps;                  // their identity then, checked before each use
  std::uint64_t bytes = 0;
  std::uint64_t last_use = 0;  // guarded by the registry mutex
};

namespace {

using Clock = std::chrono::steady_clock;

// A PCH pays for itself only on programs whose headers take a while to parse (cub: 1-1.5 s; a
// kernel with no header: 10 ms). Making one costs about 1.5 plain compiles, off the caller's thread.
constexpr std::int64_t kDefaultMinCompileNs = 50'000'000;
constexpr std::size_t kMaxReady = 4;                 // cub's PCH is 178 MB
constexpr std::uint64_t kMaxReadyBytes = 1ull << 30;
constexpr std::size_t kMaxEntries = 64;              // failed ones are remembered, not retried
constexpr std::size_t kMaxHeapBytes = 2ull << 30;    // NVRTC's PCH heap is 256 MiB by default

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

struct Job {
  std::shared_ptr<PchEntry> entry;
  std::string prefix, program_name;
  std::vector<Header> headers;
  std::vector<std::string> options;
};

struct Registry {
  std::mutex mutex;  // guards everything below but `heap`
  std::condition_variable changed;  // a job queued or finished, an entry ready or failed, stopping
  std::map<std::string, std::shared_ptr<PchEntry>> entries;
  std::deque<Job> jobs;
  bool busy = false;
  bool worker_started = false;
  std::atomic<bool> stopping{false};
  std::thread worker;
  std::string dir;  // private to this process, made on first need, removed at exit
  bool dir_failed = false;
  std::uint64_t tick = 0, files = 0;
  PchStats stats;
  bool enabled = true;
  std::int64_t min_ns = kDefaultMinCompileNs;
  // Held around every NVRTC compile that makes or uses a PCH (the heap is one per process).
  // Taken before `mutex`, never while holding it.
  std::timed_mutex heap;

  Registry() { configure(-1, -1); }
  void configure(std::int64_t min_compile_ns, int on) {
    const char* v = std::getenv("JITBRIDGE_PCH");
    std::lock_guard<std::mutex> lock(mutex);
    enabled = on < 0 ? !(v && std::string_view(v) == "0") : on != 0;
    min_ns = min_compile_ns < 0 ? kDefaultMinCompileNs : min_compile_ns;
  }
};

Registry& registry() {
  static Registry* r = new Registry;  // lives until exit; the atexit hook stops its thread first
  return *r;
}

// Removes `e` from the map and its file from disk. Caller holds `heap` (nobody reads the file).
void drop_locked(Registry& r, const std::shared_ptr<PchEntry>& e) {
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.entries.find(e->key);
    if (it == r.entries.end() || it->second != e) return;
    r.entries.erase(it);
    if (e->state == PchState::ready) ++r.stats.dropped;
  }
  ::unlink(e->file.c_str());
}

// The ready entries beyond the bounds, least recently used first. Caller holds `heap`.
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

int cancel_when_stopping(void*, void*) { return registry().stopping.load() ? 1 : 0; }

// Makes the PCH of `job` (the worker thread, `heap` held by the caller).
void make(Registry& r, Job& job) {
  const NvrtcApi& api = nvrtc_api();
  bool ok = false;
  std::vector<std::string> headers;
  for (int attempt = 0; attempt < 2 && !ok; ++attempt) {
    NvrtcProgram prog(job.prefix, job.program_name, job.headers);
    prog.set_cancel(cancel_when_stopping, nullptr);
    const std::string trace = job.entry->file + ".trace";  // NVRTC writes <trace>.json
    std::vector<std::string> opts = job.options;
    opts.push_back("--fdevice-time-trace=" + trace);
    opts.push_back("-create-pch=" + job.entry->file);
    opts.push_back("-pch-messages=false");
    opts.push_back("-pch-verbose=false");
    const bool compiled = prog.compile(opts);
    const nvrtcResult status = prog.pch_create_status();
    std::string log = prog.log(), rest;
    std::string json;
    const bool traced = read_file(trace + ".json", json);
    ::unlink((trace + ".json").c_str());
    if (status == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED && attempt == 0 && api.nvrtcSetPCHHeapSize) {
      const std::size_t need = prog.pch_heap_required();
      if (need == 0 || need > kMaxHeapBytes) break;
      // A new heap makes every PCH made so far unusable: drop them all, then try again.
      std::vector<std::shared_ptr<PchEntry>> all;
      {
        std::lock_guard<std::mutex> lock(r.mutex);
        for (auto& [key, e] : r.entries)
          if (e->state == PchState::ready) all.push_back(e);
      }
      for (const auto& e : all) drop_locked(r, e);
      if (api.nvrtcSetPCHHeapSize(need) != NVRTC_SUCCESS) break;
      continue;
    }
    parse_ptxas_info(log, &rest);
    // Diagnostics from the headers would vanish from the logs of compiles that use the PCH.
    const bool quiet = rest.find_first_not_of(" \t\r\n") == std::string::npos;
    if (!compiled || status != NVRTC_SUCCESS || !quiet || !traced) break;
    try {
      headers = trace_headers(json);
    } catch (const std::exception&) {
      break;
    }
    struct stat st;
    if (::stat(job.entry->file.c_str(), &st) != 0) break;
    job.entry->bytes = static_cast<std::uint64_t>(st.st_size);
    ok = true;
  }
  if (ok) {
    job.entry->headers = headers;
    job.entry->deps.recorded_ns = now_ns();
    job.entry->deps.deps =
        record_dependencies(headers, job.headers, include_search_dirs(job.options), job.entry->deps.cwd);
  } else {
    ::unlink(job.entry->file.c_str());
  }
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    job.entry->state = ok ? PchState::ready : PchState::failed;
    job.entry->last_use = ++r.tick;
    ++(ok ? r.stats.created : r.stats.failed);
  }
  if (ok) evict_locked(r);
}

void worker_loop() {
  Registry& r = registry();
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(r.mutex);
      r.changed.wait(lock, [&] { return r.stopping.load() || !r.jobs.empty(); });
      if (r.stopping.load()) return;
      job = std::move(r.jobs.front());
      r.jobs.pop_front();
      r.busy = true;
    }
    {
      std::lock_guard<std::timed_mutex> heap(r.heap);
      try {
        make(r, job);
      } catch (const std::exception&) {
        std::lock_guard<std::mutex> lock(r.mutex);
        job.entry->state = PchState::failed;
        ++r.stats.failed;
      }
    }
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      r.busy = false;
    }
    r.changed.notify_all();
  }
}

// At exit: stop the thread (its compile is cancelled where NVRTC allows), remove the files.
void shutdown() {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.stopping.store(true);
  }
  r.changed.notify_all();
  if (r.worker.joinable()) r.worker.join();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& [key, e] : r.entries) ::unlink(e->file.c_str());
  r.entries.clear();
  if (!r.dir.empty()) ::rmdir(r.dir.c_str());
}

// Queues the making of `job` (mutex held). False when it cannot be made (no directory, bounds).
bool schedule_locked(Registry& r, Job job) {
  if (r.stopping.load() || r.entries.count(job.entry->key)) return false;
  if (r.entries.size() >= kMaxEntries) {
    for (auto it = r.entries.begin(); it != r.entries.end();)
      it = it->second->state == PchState::failed ? r.entries.erase(it) : std::next(it);
    if (r.entries.size() >= kMaxEntries) return false;
  }
  if (r.dir.empty()) {
    if (r.dir_failed) return false;
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/jitbridge-pch-XXXXXX";
    if (!::mkdtemp(templ.data())) {
      r.dir_failed = true;
      return false;
    }
    r.dir = templ;
  }
  job.entry->file = fmt::format("{}/p{}.pch", r.dir, r.files++);
  r.entries[job.entry->key] = job.entry;
  r.jobs.push_back(std::move(job));
  if (!r.worker_started) {
    r.worker_started = true;
    r.worker = std::thread(worker_loop);
    std::atexit(shutdown);
  }
  return true;
}

}  // namespace

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
    if (user_explicit_option(o)) {  // the user's own PCH files: still one compile at a time
      held_ = std::unique_lock<std::timed_mutex>(r.heap);
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

  std::shared_ptr<PchEntry> entry;
  {
    std::unique_lock<std::mutex> lock(r.mutex);
    auto it = r.entries.find(key_);
    if (it != r.entries.end() && it->second->state == PchState::making) {
      // Wait for it only when it should be done well before a plain compile would be.
      const std::shared_ptr<PchEntry> making = it->second;
      const auto plain = std::chrono::nanoseconds(making->plain_ns);
      const auto done_at = making->started + plain * 3 / 2;
      if (done_at - Clock::now() < plain / 2)
        r.changed.wait_until(lock, Clock::now() + plain / 2,
                             [&] { return making->state != PchState::making || r.stopping.load(); });
      it = r.entries.find(key_);
    }
    if (it == r.entries.end()) {
      candidate_ = true;
    } else if (it->second->state == PchState::ready) {
      entry = it->second;
    }
  }
  if (candidate_) {
    prefix_ = std::string(prefix);
    program_name_ = options.program_name;
    headers_ = options.headers;
    return;
  }
  if (!entry) return;
  // At most half a plain compile's wait for another thread's PCH compile; else compile plain.
  std::unique_lock<std::timed_mutex> heap(r.heap, std::defer_lock);
  if (!heap.try_lock_for(std::chrono::nanoseconds(entry->plain_ns / 2))) return;
  if (!dependencies_unchanged(entry->deps)) {  // a header it holds was edited: make it again
    drop_locked(r, entry);
    candidate_ = true;
    prefix_ = std::string(prefix);
    program_name_ = options.program_name;
    headers_ = options.headers;
    return;
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.entries.find(key_);
  if (it == r.entries.end() || it->second != entry) return;  // dropped meanwhile (heap resized, evicted)
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
  const std::int64_t elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
  if (use_) {
    if (log.find("precompiled header") != std::string::npos) {  // refused: never let it change a log
      drop_locked(r, use_);
      held_ = {};
      return false;
    }
    std::lock_guard<std::mutex> lock(r.mutex);
    ++r.stats.used;
  }
  held_ = {};
  if (!ok || !candidate_) return true;
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!user_pch_ && (!r.enabled || elapsed < r.min_ns)) return true;
  Job job;
  job.entry = std::make_shared<PchEntry>();
  job.entry->key = key_;
  job.entry->started = Clock::now();
  job.entry->plain_ns = elapsed;
  job.prefix = std::move(prefix_);
  job.program_name = std::move(program_name_);
  job.headers = std::move(headers_);
  job.options = std::move(options_);
  candidate_ = false;
  if (schedule_locked(r, std::move(job))) r.changed.notify_all();
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

void pch_wait_idle() {
  Registry& r = registry();
  std::unique_lock<std::mutex> lock(r.mutex);
  r.changed.wait(lock, [&] { return r.stopping.load() || (r.jobs.empty() && !r.busy); });
}

void pch_configure(std::int64_t min_compile_ns, int enabled) { registry().configure(min_compile_ns, enabled); }

void pch_reset() {
  Registry& r = registry();
  pch_wait_idle();
  std::lock_guard<std::timed_mutex> heap(r.heap);
  std::vector<std::shared_ptr<PchEntry>> all;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto& [key, e] : r.entries) all.push_back(e);
  }
  for (const auto& e : all) drop_locked(r, e);
}

}  // namespace jitbridge::detail
