// pch.hpp — the process's precompiled headers (NVRTC PCH): which compiles make one, which use one.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jitbridge/jit.hpp"

namespace jitbridge::detail {

// The part of `source` a precompiled header stands for: its leading run of blank lines, comments and
// #include / #define / #undef / #pragma lines, cut after the run's last #include. "" when that run
// has no #include (or a comment or directive in it is left open). Pure.
std::string_view pch_prefix(std::string_view source);

// Removes the PCH directories ("<tmp>/jitbridge-pch-<pid>-XXXXXX") of this user's processes that
// are gone without removing them (killed before exit): each PCH is 100+ MB. Run when a process
// makes its own directory; never touches another user's or a live process's. A process holds a
// flock (CacheLock) on its directory's "owner.lock" for its life, and the kernel drops it however
// the process ends: a directory whose lock can be taken is an orphan, whatever process has its PID
// now (a reused PID, a PID namespace sharing the $TMPDIR). One without a taken lock (made before
// the lock, its owner about to take it, no flock on the filesystem) goes only when no process has
// its PID and it was untouched for a minute.
void pch_remove_orphans(const std::string& tmp);

// False for compiles whose result must not be cached: options that make or read a PCH file by hand
// (-create-pch, -use-pch), whose contents (and so whose headers) jitbridge cannot know.
bool pch_cacheable(const std::vector<std::string>& nvrtc_options);

struct PchEntry;

// One NVRTC compile's part in the process's precompiled headers. Construct it right before the
// compile and call finish() right after. The first compile with a prefix (pch_prefix) runs plain;
// when it took long enough, the second makes the PCH from the prefix alone and uses it, and later
// ones use it. A compile uses a PCH only when it is traced (NVRTC refuses a PCH made under other
// options, the trace option included), made from the same prefix, options, program name and
// in-memory headers, and the headers it read are unchanged. Thread-safe: every compile that makes
// or uses a PCH holds one process-wide lock (NVRTC has one PCH heap per process).
// Never throws except std::bad_alloc (and what nvrtc_api() throws, which compile() met before).
class PchStep {
 public:
  PchStep(std::string_view source, const CompileOptions& options, const std::vector<std::string>& nvrtc_options,
          bool traced);
  ~PchStep();
  PchStep(const PchStep&) = delete;
  PchStep& operator=(const PchStep&) = delete;

  // The options for NVRTC (the effective options plus the trace option): a user's automatic -pch,
  // -pch-dir, -pch-verbose and -pch-messages taken out (jitbridge manages PCHs then), and
  // -use-pch=<file> -pch-messages=false -pch-verbose=false added when a PCH is used.
  std::vector<std::string> rewrite(std::vector<std::string> options) const;
  // After the compile. False when a used PCH showed in the log (NVRTC refused it): the PCH is
  // dropped for good and the caller compiles again. After a successful plain compile that took long
  // enough, the prefix is marked: the next compile with it makes the PCH.
  bool finish(bool ok, const std::string& log);
  // The headers the compile read: `traced`, with the PCH's own in front (NVRTC's trace leaves
  // the headers inside a PCH out).
  std::optional<std::vector<std::string>> headers(std::optional<std::vector<std::string>> traced) const;
  bool uses_pch() const { return static_cast<bool>(use_); }

 private:
  std::chrono::steady_clock::time_point start_;
  bool user_pch_ = false;  // the user gave -pch: managed PCH, whatever the time or JITBRIDGE_PCH
  std::unique_lock<std::mutex> held_;
  std::shared_ptr<PchEntry> use_;
  std::string key_;
  std::vector<std::string> options_;  // effective options without the user's PCH options
  bool candidate_ = false;  // no entry for the key yet: finish() may mark it
};

// ---- test hooks (tests/cpp/test_pch.cpp) and the bench -----------------------------------------
struct PchStats {
  std::uint64_t created = 0;  // PCHs made
  std::uint64_t used = 0;     // compiles that used one
  std::uint64_t failed = 0;   // makings that failed or were refused (their log was not empty)
  std::uint64_t dropped = 0;  // PCHs removed: headers changed, evicted, heap resized, refused by NVRTC
  std::uint64_t ready = 0;    // PCHs ready now
};
PchStats pch_stats();
// Sets the least plain-compile time (ns) that makes a PCH worth making (negative: the built-in
// default) and whether automatic PCHs are on: `enabled` 1 on, 0 off, -1 as JITBRIDGE_PCH says
// (read again now; "0" turns them off).
void pch_configure(std::int64_t min_compile_ns, int enabled = -1);
// Drops every PCH (files included) and forgets every prefix seen.
void pch_reset();
// This process's PCH directory, made now if it was not yet; "" when there is none (refused or failed).
// Its lock keeps a descriptor open for the process's life: tests counting descriptors make it first.
std::string pch_directory();

}  // namespace jitbridge::detail
