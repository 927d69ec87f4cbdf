// test_cache_lock.cpp — the lock file beside a cache entry: busy/held/unavailable, the state it keeps, a holder killed while holding, waits, timeouts, and 8 threads taking turns ([threads]).
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cache_lock.hpp"
#include "fd_count.hpp"
#include "temp_dir.hpp"
#include "jitbridge/cache.hpp"
#include "jit_internal.hpp"

using namespace jitbridge;
using detail::CacheLock;
using detail::Turn;
using jitbridge::testing::NoFdLeak;

namespace {

struct LockDir : jitbridge::testing::TempDir {
  LockDir() : TempDir("cache-lock") {}
};

std::string contents(const std::string& path) {
  std::string out;
  REQUIRE(detail::read_file(path, out));
  return out;
}

// A hang guard for waits on other threads or processes (far above anything here); no assertion is about speed.
constexpr auto kBound = std::chrono::seconds(120);

template <class F>
void wait_for(F condition) {
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (!condition()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

TEST_CASE("cache lock: one holder at a time, even within a process; its file says how it ended") {
  NoFdLeak fds;
  LockDir dir;
  const std::string path = dir.file("k.lock");
  CacheLock a, b;
  REQUIRE(a.try_lock(path) == CacheLock::Try::held);
  CHECK(a.previous().empty());
  CHECK(contents(path).rfind("compiling pid " + std::to_string(::getpid()) + " host ", 0) == 0);
  CHECK(b.try_lock(path) == CacheLock::Try::busy);  // another open file description: excluded like a process
  CHECK(b.try_lock(path) == CacheLock::Try::busy);
  a.release(true);
  CHECK_FALSE(a.held());
  CHECK(contents(path) == "done\n");
  REQUIRE(b.try_lock(path) == CacheLock::Try::held);
  CHECK(b.previous() == "done");
  b.release(false);
  CHECK(contents(path) == "none\n");
  {
    CacheLock c;
    REQUIRE(c.try_lock(path) == CacheLock::Try::held);
    CHECK(c.previous() == "none");
  }  // the destructor releases it as "none" (nothing stored)
  CHECK(contents(path) == "none\n");
  CacheLock d;
  CHECK(d.try_lock(path) == CacheLock::Try::held);
}

TEST_CASE("cache lock: a symlink, FIFO, directory or missing folder is unavailable at once, never followed or waited on") {
  NoFdLeak fds;
  LockDir dir;
  const std::string target = dir.file("target");
  REQUIRE(::close(::open(target.c_str(), O_WRONLY | O_CREAT, 0600)) == 0);
  REQUIRE(::symlink(target.c_str(), dir.file("link.lock").c_str()) == 0);
  REQUIRE(::mkfifo(dir.file("fifo.lock").c_str(), 0600) == 0);
  REQUIRE(::mkdir(dir.file("dir.lock").c_str(), 0700) == 0);
  for (const char* name : {"link.lock", "fifo.lock", "dir.lock", "missing/k.lock"}) {
    INFO(name);
    CacheLock l;
    CHECK(l.try_lock(dir.file(name)) == CacheLock::Try::unavailable);
    CHECK_FALSE(l.held());
    bool waited = true;
    int calls = 0;
    CHECK(detail::take_turn(dir.file(name), 3600, [&] { return ++calls, false; }, l, &waited) == Turn::alone);
    CHECK_FALSE(waited);
    CHECK(calls == 0);
  }
  struct stat st;
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK(st.st_size == 0);  // the symlink's target was never written
}

TEST_CASE("cache lock: take_turn holds a free lock, unless the entry appeared meanwhile") {
  NoFdLeak fds;
  LockDir dir;
  const std::string path = dir.file("k.lock");
  CacheLock l;
  bool waited = true;
  CHECK(detail::take_turn(path, 1, [] { return false; }, l, &waited) == Turn::held);
  CHECK(l.held());
  CHECK_FALSE(waited);
  l.release(true);
  CHECK(detail::take_turn(path, 1, [] { return true; }, l, &waited) == Turn::ready);
  CHECK_FALSE(l.held());
  CHECK(contents(path) == "done\n");
}

TEST_CASE("cache lock: a waiter gets the entry its holder stores; past its timeout it compiles alone; 0 never waits") {
  NoFdLeak fds;
  LockDir dir;
  const std::string path = dir.file("k.lock");
  CacheLock holder;
  REQUIRE(holder.try_lock(path) == CacheLock::Try::held);

  SECTION("the entry appears while waiting") {
    std::atomic<int> calls{0};
    std::atomic<bool> stored{false};
    CacheLock waiter;
    bool waited = false;
    Turn turn = Turn::alone;
    std::thread t([&] { turn = detail::take_turn(path, 3600, [&] { return ++calls, stored.load(); }, waiter, &waited); });
    wait_for([&] { return calls.load() >= 2; });  // it has looked for the entry while the lock was busy
    stored = true;
    t.join();
    CHECK(turn == Turn::ready);
    CHECK(waited);
    CHECK_FALSE(waiter.held());
    CHECK(holder.held());
  }
  SECTION("timeout") {
    CacheLock waiter;
    bool waited = false;
    CHECK(detail::take_turn(path, 0.05, [] { return false; }, waiter, &waited) == Turn::timed_out);
    CHECK(waited);
    CHECK_FALSE(waiter.held());
  }
  SECTION("zero") {
    CacheLock waiter;
    bool waited = false;
    int calls = 0;
    CHECK(detail::take_turn(path, 0, [&] { return ++calls, false; }, waiter, &waited) == Turn::alone);
    CHECK(waited);
    CHECK(calls == 0);
  }
}

TEST_CASE("cache lock: a holder that ends without an entry sends its waiters to compile alone, one after another never") {
  NoFdLeak fds;
  LockDir dir;
  const std::string path = dir.file("k.lock");
  for (bool stored : {false, true}) {  // "none" (a failed compile), "done" (an entry this waiter cannot see)
    INFO("stored " << stored);
    CacheLock holder;
    REQUIRE(holder.try_lock(path) == CacheLock::Try::held);
    std::atomic<int> calls{0};
    CacheLock waiter;
    bool waited = false;
    Turn turn = Turn::held;
    std::thread t([&] { turn = detail::take_turn(path, 3600, [&] { return ++calls, false; }, waiter, &waited); });
    wait_for([&] { return calls.load() >= 1; });
    holder.release(stored);
    t.join();
    CHECK(turn == Turn::alone);
    CHECK(waited);
    CHECK_FALSE(waiter.held());
    CHECK(contents(path) == (stored ? "done\n" : "none\n"));  // kept for the next waiter
  }
}

TEST_CASE("cache lock: a holder killed while holding is taken over by its waiter") {
  NoFdLeak fds;
  LockDir dir;
  const std::string path = dir.file("k.lock");
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // async-signal-safe calls only: lock as CacheLock does, say so, wait to be killed
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::write(fd, "compiling pid child\n", 20) != 20) ::_exit(1);
    if (::write(ready[1], "x", 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  const ssize_t got = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  REQUIRE(got == 1);

  std::atomic<int> calls{0};
  CacheLock waiter;
  bool waited = false;
  Turn turn = Turn::alone;
  // A timeout far beyond the bound: only the kernel dropping the dead holder's lock can end this wait.
  std::thread t([&] { turn = detail::take_turn(path, 3600, [&] { return ++calls, false; }, waiter, &waited); });
  wait_for([&] { return calls.load() >= 1; });  // busy: waiting on the child's lock
  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  t.join();
  CHECK(turn == Turn::held);  // taken over: the dead holder left no entry and no "done"/"none"
  CHECK(waited);
  CHECK(waiter.previous() == "compiling pid child");
  waiter.release(true);
}

TEST_CASE("cache lock: lock files untouched for a day go when the directory is listed; fresh ones and entries stay") {
  LockDir dir;
  const std::string v1 = dir.file("v1");
  REQUIRE(::mkdir(v1.c_str(), 0700) == 0);
  for (const char* name : {"/old.lock", "/fresh.lock", "/old.jbc"})
    REQUIRE(::close(::open((v1 + name).c_str(), O_WRONLY | O_CREAT, 0600)) == 0);
  const struct timespec two_days_ago[2] = {{::time(nullptr) - 2 * 86400, 0}, {::time(nullptr) - 2 * 86400, 0}};
  for (const char* name : {"/old.lock", "/old.jbc"})
    REQUIRE(::utimensat(AT_FDCWD, (v1 + name).c_str(), two_days_ago, 0) == 0);
  CacheConfig config;
  config.directory = dir.path;
  Cache cache(config);
  CHECK(cache.info().entries == 1);  // lock files are not entries
  struct stat st;
  CHECK(::stat((v1 + "/old.lock").c_str(), &st) != 0);
  CHECK(::stat((v1 + "/fresh.lock").c_str(), &st) == 0);
  CHECK(::stat((v1 + "/old.jbc").c_str(), &st) == 0);  // an entry goes only by size (least recently used)
}

TEST_CASE("threads: 8 threads take turns on one lock: one holds it, the others get its entry", "[threads]") {
  LockDir dir;
  const std::string path = dir.file("k.lock");
  constexpr int kThreads = 8;
  std::atomic<bool> stored{false};
  std::atomic<int> arrived{0};
  std::vector<Turn> turns(kThreads, Turn::alone);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      ++arrived;
      while (arrived.load() < kThreads) std::this_thread::yield();  // all start together
      CacheLock lock;
      const Turn t = detail::take_turn(path, 3600, [&] { return stored.load(); }, lock, nullptr);
      if (t == Turn::held) {
        stored = true;  // "compiles" and stores
        lock.release(true);
      }
      turns[static_cast<std::size_t>(i)] = t;
    });
  }
  for (std::thread& t : threads) t.join();
  int held = 0, ready = 0;
  for (Turn t : turns) {
    held += t == Turn::held;
    ready += t == Turn::ready;
  }
  CHECK(held == 1);
  CHECK(ready == kThreads - 1);
}
