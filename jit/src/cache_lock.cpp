// cache_lock.cpp — the lock file beside a cache entry: flock(2), released by the kernel when its holder dies (see cache_lock.hpp, docs/DESIGN.md "Cache").
#include "cache_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

namespace jitbridge::detail {
namespace {

// Replaces the file's contents with `text` (a few bytes; the lock is held, so no reader sees it torn).
void write_state(int fd, const std::string& text) noexcept {
  if (::ftruncate(fd, 0) != 0) return;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n > 0) done += static_cast<std::size_t>(n);
    else if (n < 0 && errno == EINTR) continue;
    else return;  // a full disk: the state is only a hint
  }
}

std::string read_state(int fd) {
  char buf[128];
  ssize_t n;
  do n = ::pread(fd, buf, sizeof buf, 0);
  while (n < 0 && errno == EINTR);
  std::string s(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string holder_state() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return "compiling pid " + std::to_string(::getpid()) + " host " + host + "\n";
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

constexpr std::chrono::microseconds kMinPause{1000}, kMaxPause{50000};  // between tries of a busy lock

}  // namespace

CacheLock::Try CacheLock::try_lock(const std::string& path, const DirectoryTrust* trust) {
  if (held_) return Try::held;
  if (!fd_) {
    // O_NOFOLLOW: a symlink is refused, not followed; O_NONBLOCK: a FIFO never blocks the open.
    fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
    struct stat st;
    // Someone else's file (anyone who could write it could hold it to stall every compile) is refused.
    if (!fd_ || ::fstat(fd_.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        (trust ? !trust->owner_ok(st.st_uid) : st.st_uid != ::geteuid())) {
      fd_.close();
      return Try::unavailable;
    }
    // A shared cache (trusted group): the other members lock it too; the umask must not decide that.
    if (trust && trust->group && st.st_uid == trust->self) ::fchmod(fd_.get(), 0660);
  }
  int rc;
  do rc = ::flock(fd_.get(), LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    if (errno == EWOULDBLOCK) return Try::busy;
    fd_.close();  // ENOLCK (NFS without a lock manager), EOPNOTSUPP, ...
    return Try::unavailable;
  }
  held_ = true;
  previous_ = read_state(fd_.get());
  write_state(fd_.get(), holder_state());
  return Try::held;
}

void CacheLock::release(bool stored) noexcept {
  if (held_) {
    write_state(fd_.get(), stored ? "done\n" : "none\n");
    // Explicit, not left to close(): a child forked meanwhile shares the open file description,
    // and its copy of the descriptor would keep the lock held until it exits.
    ::flock(fd_.get(), LOCK_UN);
    held_ = false;
  }
  fd_.close();
}

Turn take_turn(const std::string& lock_path, double timeout_s, const std::function<bool()>& ready, CacheLock& lock,
               bool* waited, const DirectoryTrust* trust) {
  using clock = std::chrono::steady_clock;
  const clock::time_point start = clock::now();
  bool was_busy = false;
  if (waited) *waited = false;
  for (;;) {
    const CacheLock::Try t = lock.try_lock(lock_path, trust);
    if (t == CacheLock::Try::unavailable) return Turn::alone;
    if (t == CacheLock::Try::held) {
      bool found = false;
      try {
        found = ready();  // stored between the caller's lookup and now
      } catch (...) {
        lock.release(false);
        throw;
      }
      if (found) {
        lock.release(true);
        return Turn::ready;
      }
      if (was_busy && (starts_with(lock.previous(), "done") || starts_with(lock.previous(), "none"))) {
        // The holder we waited for ended without an entry we can see: the others waiting must not
        // compile one at a time behind us. (Its "none" is kept for them.)
        lock.release(starts_with(lock.previous(), "done"));
        return Turn::alone;
      }
      return Turn::held;  // first, or taking over from a holder that died while compiling
    }
    // Busy: someone else compiles this key.
    if (!was_busy) {
      was_busy = true;
      if (waited) *waited = true;
    }
    if (timeout_s <= 0) {
      lock.release(false);
      return Turn::alone;
    }
    if (ready()) {
      lock.release(false);  // not held: closes the descriptor only
      return Turn::ready;
    }
    const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - start);
    if (elapsed.count() >= timeout_s * 1e6) {
      lock.release(false);
      return Turn::timed_out;
    }
    // A twentieth of the wait so far: the entry is noticed within about 5% of the holder's compile
    // time (plus 1 ms), and a long wait tries 20 times a second, not 1000.
    std::this_thread::sleep_for(std::clamp(elapsed / 20, kMinPause, kMaxPause));
  }
}

}  // namespace jitbridge::detail
