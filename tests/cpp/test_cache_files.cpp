// test_cache_files.cpp — cache entry files that are not what they should be (FIFOs, symlinks, directories,
// oversized files), short writes, the mutex never held across a stalled read, header reads, and no descriptor leaks.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <thread>

#include "cache_internal.hpp"
#include "cache_test_support.hpp"
#include "fd_count.hpp"
#include "temp_dir.hpp"
#include "jit_internal.hpp"
#include "jitbridge/cache.hpp"

using namespace jitbridge;
using jitbridge::testing::NoFdLeak;
using jitbridge::testing::record_with;
using jitbridge::testing::open_fds;

namespace {

// Names in `dir` starting with `prefix`.
int count_names(const std::string& dir, const std::string& prefix) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) n += std::string(e->d_name).rfind(prefix, 0) == 0;
    ::closedir(d);
  }
  return n;
}

// Runs `work` on a thread and says whether it finished. The time limit is only a hang guard (far
// above what any of this takes; no assertion depends on speed): past it, `unstick` is called so
// that the thread can end, and the caller fails instead of hanging.
bool finishes(const std::function<void()>& work, const std::function<void()>& unstick) {
  std::packaged_task<void()> task(work);
  std::future<void> done = task.get_future();
  std::thread t(std::move(task));
  const bool in_time = done.wait_for(std::chrono::seconds(120)) == std::future_status::ready;
  if (!in_time) unstick();
  t.join();
  done.get();  // rethrows what `work` threw
  return in_time;
}

// Opens the write end of FIFO `path` (no blocking: fails while nobody reads it) and closes it,
// which ends a reader blocked on it.
void release_fifo(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) ::close(fd);
}

CacheConfig disk_at(const std::string& dir) { return CacheConfig{true, dir, 1ull << 30}; }

bool is_regular(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// What a lookup of `key` must do when something other than an entry sits at its path: miss at
// once, keep the disk side on, and let the next store put a real entry there.
void miss_then_replaced(const std::string& dir, const std::string& key, const std::function<void()>& unstick) {
  const std::string path = dir + "/v1/" + key + ".jbc";
  Cache cache(disk_at(dir));
  std::shared_ptr<const Program> got;
  CHECK(finishes([&] { got = cache.impl().lookup(key); }, unstick));
  CHECK_FALSE(got);
  CHECK(cache.info().disk);
  cache.impl().store(key, record_with("entry of " + key));
  CHECK(cache.info().disk);
  CHECK(is_regular(path));
  CHECK(count_names(dir + "/v1", ".tmp-") == 0);
  Cache fresh(disk_at(dir));
  std::shared_ptr<const Program> hit = fresh.impl().lookup(key);
  REQUIRE(hit);
  CHECK(hit->origin == Origin::disk_cache);
  CHECK(hit->cubin == "entry of " + key);
}

}  // namespace

TEST_CASE("cache files: a FIFO where an entry should be is a prompt miss, then replaced") {
  NoFdLeak fds;
  const jitbridge::testing::TempDir temp("cache-files");
  const std::string& dir = temp.path;
  REQUIRE(::mkdir((dir + "/v1").c_str(), 0700) == 0);
  const std::string fifo = dir + "/v1/fifo-key.jbc";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  miss_then_replaced(dir, "fifo-key", [&] { release_fifo(fifo); });
}

TEST_CASE("cache files: a symlink to /dev/zero (or to anything) is a miss that reads nothing") {
  NoFdLeak fds;
  const jitbridge::testing::TempDir temp("cache-files");
  const std::string& dir = temp.path;
  REQUIRE(::mkdir((dir + "/v1").c_str(), 0700) == 0);
  REQUIRE(::symlink("/dev/zero", (dir + "/v1/zero-key.jbc").c_str()) == 0);
  miss_then_replaced(dir, "zero-key", [] {});
  // The bounded reader alone: a symlink is refused even to a regular file.
  std::string out;
  const std::string target = dir + "/v1/zero-key.jbc";
  REQUIRE(::symlink(target.c_str(), (dir + "/v1/link-key.jbc").c_str()) == 0);
  CHECK_FALSE(detail::read_entry_file(dir + "/v1/link-key.jbc", kMaxCacheEntryBytes, out));
  CHECK(detail::read_entry_file(target, kMaxCacheEntryBytes, out));
}

TEST_CASE("cache files: a directory where an entry should be keeps the disk cache on") {
  NoFdLeak fds;
  const jitbridge::testing::TempDir temp("cache-files");
  const std::string& dir = temp.path;
  REQUIRE(::mkdir((dir + "/v1").c_str(), 0700) == 0);
  SECTION("empty: removed and replaced") {
    REQUIRE(::mkdir((dir + "/v1/dir-key.jbc").c_str(), 0700) == 0);
    miss_then_replaced(dir, "dir-key", [] {});
  }
  SECTION("not empty: left alone, the entry skipped, the disk side still on") {
    REQUIRE(::mkdir((dir + "/v1/dir-key.jbc").c_str(), 0700) == 0);
    REQUIRE(::mkdir((dir + "/v1/dir-key.jbc/inside").c_str(), 0700) == 0);
    Cache cache(disk_at(dir));
    CHECK_FALSE(cache.impl().lookup("dir-key"));
    cache.impl().store("dir-key", record_with("x"));
    CHECK(cache.info().disk);
    CHECK(count_names(dir + "/v1", ".tmp-") == 0);
    std::shared_ptr<const Program> hit = cache.impl().lookup("dir-key");
    REQUIRE(hit);
    CHECK(hit->origin == Origin::memory_cache);
    cache.impl().store("other-key", record_with("y"));  // later entries still go to disk
    CHECK(is_regular(dir + "/v1/other-key.jbc"));
  }
}

TEST_CASE("cache files: rename_into_place takes an NFS retransmission's ENOENT as done, nothing else") {
  const jitbridge::testing::TempDir dir("cache-rename");
  const std::string temp = dir.file(".tmp-1"), path = dir.file("k.jbc");
  auto write = [](const std::string& p, const char* text) {
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text, std::strlen(text)) == static_cast<ssize_t>(std::strlen(text)));
    REQUIRE(::close(fd) == 0);
  };
  SECTION("a plain rename") {
    write(temp, "new");
    CHECK(detail::rename_into_place(temp, path) == 0);
    CHECK_FALSE(is_regular(temp));
    CHECK(is_regular(path));
  }
  SECTION("the temporary file gone and the entry in place: the server already renamed it") {
    write(path, "renamed by the first transmission");
    CHECK(detail::rename_into_place(temp, path) == 0);
  }
  SECTION("the temporary file gone and no entry: ENOENT") {
    CHECK(detail::rename_into_place(temp, path) == ENOENT);
  }
  SECTION("the temporary file gone and a directory in the entry's place: ENOENT") {
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
    CHECK(detail::rename_into_place(temp, path) == ENOENT);
  }
  SECTION("an empty directory in the entry's place is removed, a full one refuses") {
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
    write(temp, "new");
    CHECK(detail::rename_into_place(temp, path) == 0);
    CHECK(is_regular(path));
    REQUIRE(::unlink(path.c_str()) == 0);
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
    REQUIRE(::mkdir((path + "/inside").c_str(), 0700) == 0);
    write(temp, "new");
    const int err = detail::rename_into_place(temp, path);
    CHECK((err == EISDIR || err == ENOTEMPTY || err == EEXIST));
    CHECK(is_regular(temp));
  }
}

TEST_CASE("cache files: entries over the size cap are misses, never read") {
  NoFdLeak fds;
  const jitbridge::testing::TempDir temp("cache-files");
  const std::string& dir = temp.path;
  REQUIRE(::mkdir((dir + "/v1").c_str(), 0700) == 0);
  {
    // Sparse: costs no disk space.
    const int fd = ::open((dir + "/v1/big-key.jbc").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(kMaxCacheEntryBytes + 1)) == 0);
    ::close(fd);
  }
  miss_then_replaced(dir, "big-key", [] {});
  // A file whose size says 0 but whose contents go on (as /proc files do) is read no further than
  // the cap allows.
  std::string out;
  CHECK_FALSE(detail::read_entry_file("/proc/self/status", 16, out));
  CHECK(out.size() <= 17);
  CHECK(detail::read_entry_file("/proc/self/status", 1 << 20, out));
  CHECK(out.find("Pid:") != std::string::npos);
  CHECK_FALSE(detail::read_entry_file(dir + "/v1/missing.jbc", 1 << 20, out));
  CHECK_FALSE(detail::read_entry_file(dir + "/v1", 1 << 20, out));
}

TEST_CASE("cache files: a short write (file size limit) removes the temporary file and its descriptor") {
  NoFdLeak fds;
  const jitbridge::testing::TempDir temp("cache-files");
  const std::string& dir = temp.path;
  // In a child: the limit and the ignored SIGXFSZ must not touch the test process. The child reports
  // what failed in its exit status (no Catch2 there).
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int failed = 0;
    ::signal(SIGXFSZ, SIG_IGN);
    Cache cache(disk_at(dir));
    cache.impl().store("small", record_with("fits"));  // creates the directory before the limit
    struct rlimit limit;
    ::getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = 4096;  // the entry below is 64 KiB: the write stops short with EFBIG
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(100);
    const int before = open_fds();
    cache.impl().store("large", record_with(std::string(64 << 10, 'c')));
    if (open_fds() != before) failed |= 1;                           // the temp file's descriptor leaked
    if (count_names(dir + "/v1", ".tmp-") != 0) failed |= 2;         // the temp file was left behind
    if (is_regular(dir + "/v1/large.jbc")) failed |= 4;              // a torn entry was renamed into place
    if (!cache.info().disk) failed |= 8;                             // a full disk turned the cache off
    if (!cache.impl().lookup("large")) failed |= 16;                 // the memory side lost it
    cache.impl().store("small2", record_with("still fits"));
    if (!is_regular(dir + "/v1/small2.jbc")) failed |= 32;           // later entries no longer written
    ::_exit(failed);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("cache files: a dependency turned FIFO is a prompt miss; a stalled warning handler holds no mutex") {
  NoFdLeak fds;
  const jitbridge::testing::TempDir temp("cache-files");
  const std::string& dir = temp.path;
  const std::string fifo = dir + "/header.h";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A memory entry whose dependency is now a FIFO of the recorded size (0) but another mtime: its
  // check reads the header again, which must neither wait for a writer nor hit.
  Cache cache(CacheConfig{false, "", 1ull << 30});
  detail::CacheRecord stale = record_with("stale");
  stale.deps.push_back({fifo, 0, 12345, "not the hash"});
  cache.impl().store("stale", stale);
  cache.impl().store("other", record_with("other"));
  std::shared_ptr<const Program> got = std::make_shared<Program>();
  CHECK(finishes([&] { got = cache.impl().lookup("stale"); }, [&] { release_fifo(fifo); }));
  CHECK_FALSE(got);

  // Nothing that can stall runs under the mutex: a warning handler (user code) that blocks while
  // one thread's store reports an unusable directory must not stop other threads' lookups and stores.
  const std::string file = dir + "/not-a-dir";
  ::close(::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  Cache broken(disk_at(file + "/cache"));  // its directory can never be made
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first{true};
  set_warning_handler([&](const std::string&) {
    if (first.exchange(false)) {
      entered.set_value();
      released.wait();
    }
  });
  std::thread storer([&] { broken.impl().store("k", record_with("k")); });
  entered.get_future().wait();  // the storer is inside the handler now
  std::shared_ptr<const Program> other;
  const bool went_on = finishes(
      [&] {
        other = broken.impl().lookup("k");  // remembered in memory before the warning
        broken.impl().store("third", record_with("third"));
      },
      [&] { release.set_value(); });
  if (went_on) release.set_value();
  storer.join();
  set_warning_handler(nullptr);
  CHECK(went_on);
  CHECK(other);
  CHECK(broken.impl().lookup("third"));
}

TEST_CASE("cache files: UniqueFd closes exactly once, and mtime_ns saturates") {
  NoFdLeak fds;
  {
    detail::UniqueFd fd(::open("/proc/self/status", O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    CHECK(fd.close() == 0);
    CHECK_FALSE(fd);
    CHECK(fd.close() == 0);
  }
  struct stat st {};
  st.st_mtim.tv_sec = INT64_MAX / 1000;  // past the year 2262 in nanoseconds
  CHECK(detail::mtime_ns(st) == INT64_MAX);
  st.st_mtim.tv_sec = -(INT64_MAX / 1000);
  CHECK(detail::mtime_ns(st) == INT64_MIN);
  st.st_mtim.tv_sec = 2;
  st.st_mtim.tv_nsec = 5;
  CHECK(detail::mtime_ns(st) == 2'000'000'005);
}

TEST_CASE("header reads (read_file): FIFOs and devices are refused at once, symlinks to files followed, size capped") {
  NoFdLeak fds;
  const jitbridge::testing::TempDir temp("cache-files");
  const std::string& dir = temp.path;
  const std::string fifo = dir + "/h.h", file = dir + "/real.h", link = dir + "/link.h";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string out = "untouched";
  bool read = true;
  // A FIFO where a header was (the recorded size was 0) must not wait for a writer.
  CHECK(finishes([&] { read = detail::read_file(fifo, out); }, [&] { release_fifo(fifo); }));
  CHECK_FALSE(read);
  CHECK_FALSE(detail::read_file("/dev/zero", out));  // a device would read without bound
  CHECK_FALSE(detail::read_file(dir, out));          // a directory
  CHECK_FALSE(detail::read_file(dir + "/missing.h", out));
  {
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, "#define X 1\n", 12) == 12);
    ::close(fd);
  }
  REQUIRE(::symlink(file.c_str(), link.c_str()) == 0);
  CHECK(detail::read_file(link, out));
  CHECK(out == "#define X 1\n");
  // The cap: one byte over is refused, exactly at it is read.
  detail::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  CHECK_FALSE(detail::read_regular_file(fd.get(), 11, out));
  REQUIRE(::lseek(fd.get(), 0, SEEK_SET) == 0);
  CHECK(detail::read_regular_file(fd.get(), 12, out));
  CHECK(out.size() == 12);
}
