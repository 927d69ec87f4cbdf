// cache_lock.hpp — the lock file beside a cache entry (<key>.lock): one process compiles a key, the others wait for its entry.
#pragma once

#include <functional>
#include <string>

#include "cache_internal.hpp"

namespace jitbridge::detail {

// An exclusive flock(2) on a lock file beside a cache entry. flock belongs to the open file
// description, so two threads (each opening the file) exclude each other as two processes do,
// and the kernel drops it when its holder dies, however it dies: a lock file left behind by a
// killed holder is simply unlocked, and the next process takes it over. The file is never
// removed while in use; its few bytes say how the last holder ended (kept for the next waiter):
//   "compiling pid <pid> host <host>"  taken (or its holder died while compiling),
//   "done"                             released after storing the entry,
//   "none"                             released without an entry (the compile failed, or its
//                                      result is not cacheable): waiters compile on their own.
// Not thread-safe itself: one CacheLock belongs to one compile.
class CacheLock {
 public:
  enum class Try { held, busy, unavailable };
  CacheLock() = default;
  ~CacheLock() { release(false); }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

  // Opens `path` (creating it, mode 0600; 0660 for a trusted group) once and tries to take the
  // lock, never blocking: held (the file's previous state is read first, see previous()), busy
  // (another holder; the file stays open for the next try), or unavailable: the path is a
  // symlink, FIFO, directory or anything but a regular file, it is owned by someone `trust`
  // does not trust (nullptr: anyone but the effective uid), it cannot be opened, or the
  // filesystem refuses flock (ENOLCK, EOPNOTSUPP...). Never throws except std::bad_alloc.
  Try try_lock(const std::string& path, const DirectoryTrust* trust = nullptr);
  bool held() const noexcept { return held_; }
  // What the file said when this lock was taken: "done", "none", "compiling ..." or "".
  const std::string& previous() const noexcept { return previous_; }
  // Writes "done" (stored) or "none" and drops the lock and the descriptor; nothing when not
  // held (then only the descriptor is closed). Never throws.
  void release(bool stored) noexcept;

 private:
  UniqueFd fd_;
  bool held_ = false;
  std::string previous_;
};

// How take_turn() ended.
enum class Turn {
  held,       // the lock is held: compile, store, then release(true)
  ready,      // `ready` returned true: the entry is there (another process or thread stored it)
  alone,      // compile without the lock: no usable lock file, or the last holder left no entry
  timed_out,  // another holder kept the lock past the timeout: compile without it
};

// Takes the lock at `lock_path` for one compile, or waits while another holder has it. Between
// tries (spaced by a twentieth of the wait so far, 1 to 50 ms) and right after taking the lock, `ready` is
// called and should look the entry up; when it finds it, the lock is let go and the result is
// ready. Taken after waiting with no entry: a last holder that ended "done" or "none" (an entry
// this process cannot see, or none made) gives alone, so waiters never compile one after another;
// one that died while compiling is taken over (held). `timeout_s` bounds the wait (0: never
// wait: alone when busy). `*waited` says whether the lock was ever busy. `trust`: whose lock files
// are used (CacheLock::try_lock). Never throws except what `ready` throws (the lock is then not held).
Turn take_turn(const std::string& lock_path, double timeout_s, const std::function<bool()>& ready, CacheLock& lock,
               bool* waited, const DirectoryTrust* trust = nullptr);

}  // namespace jitbridge::detail
