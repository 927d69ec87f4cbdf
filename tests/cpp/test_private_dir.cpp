// test_private_dir.cpp — check_private_directory (issue 29) and the cache over directories, entries and lock files that are not the user's own.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cache_internal.hpp"
#include "cache_lock.hpp"
#include "cache_test_support.hpp"
#include "fd_count.hpp"
#include "jitbridge/jit.hpp"
#include "jitbridge/private_dir.hpp"
#include "temp_dir.hpp"

using namespace jitbridge;
using detail::check_private_directory;
using detail::DirectoryCheck;
using detail::DirectoryTrust;
using jitbridge::testing::CapturedWarnings;
using jitbridge::testing::NoFdLeak;
using jitbridge::testing::record_with;
using jitbridge::testing::TempDir;

namespace {

constexpr uid_t kOther = 65534;  // nobody: a uid that is neither this process's nor root

// Tests that need a directory owned by another uid run only as root (CI does); elsewhere they say so.
bool can_chown() {
  if (::geteuid() == 0) return true;
  WARN("not root: cannot make a directory owned by another user; this case is not exercised");
  return false;
}

std::string make_dir(const std::string& path, mode_t mode) {
  REQUIRE(::mkdir(path.c_str(), 0700) == 0);
  REQUIRE(::chmod(path.c_str(), mode) == 0);  // past the umask
  return path;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

CompileOptions sm90() {
  CompileOptions o;
  o.arch = "sm_90";
  return o;
}

const char* kSource = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 3.0f; }\n";

}  // namespace

TEST_CASE("private dir: a fresh mkdtemp directory under /tmp (root's, sticky) is accepted, symlinks resolved") {
  TempDir t("private");
  DirectoryCheck c = check_private_directory(t.path);
  CHECK(c.ok);
  CHECK(c.exists);
  CHECK(c.path == t.path);
  CHECK(c.problem.empty());
  // Through a symlink to it, with "." and ".." on the way: the real path is what is checked.
  REQUIRE(::symlink(t.path.c_str(), (t.path + "/self").c_str()) == 0);
  make_dir(t.file("sub"), 0700);
  c = check_private_directory(t.path + "/self/./sub/../sub");
  CHECK(c.ok);
  CHECK(c.path == t.file("sub"));
}

TEST_CASE("private dir: a missing directory is judged by its nearest ancestor; create makes it 0700") {
  TempDir t("private");
  const std::string want = t.path + "/a/b/cache";
  DirectoryCheck c = check_private_directory(want);
  CHECK(c.ok);
  CHECK_FALSE(c.exists);
  CHECK(c.path == want);
  struct stat st;
  CHECK(::lstat(t.file("a").c_str(), &st) != 0);  // nothing made without create
  c = check_private_directory(want, {}, /*create=*/true);
  CHECK(c.ok);
  CHECK(c.exists);
  for (const std::string& made : {t.file("a"), t.path + "/a/b", want}) {
    REQUIRE(::lstat(made.c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK((st.st_mode & 07777) == 0700);
  }
  // Two private levels (the cache's <dir>/v1): <dir> is judged as private even while v1 is missing.
  make_dir(t.file("sticky"), 01777);
  c = check_private_directory(t.path + "/sticky/v1", {}, false, 2);
  CHECK_FALSE(c.ok);
  CHECK(contains(c.problem, t.file("sticky") + " is writable by group and others (mode 1777):"));
  CHECK(check_private_directory(t.path + "/sticky/v1", {}, false, 1).ok);  // fine as a mere ancestor
  CHECK_FALSE(check_private_directory(t.path + "/sticky/v1", {}, true, 2).ok);
  CHECK(::lstat((t.path + "/sticky/v1").c_str(), &st) != 0);  // refused before anything was made in it
  c = check_private_directory(t.path + "/a/b/cache/v1", {}, true, 2);
  CHECK(c.ok);
  CHECK(c.exists);
  // Under a directory others may write without the sticky bit, nothing is made.
  make_dir(t.file("open"), 0777);
  c = check_private_directory(t.path + "/open/cache", {}, true);
  CHECK_FALSE(c.ok);
  CHECK(::lstat((t.path + "/open/cache").c_str(), &st) != 0);
}

TEST_CASE("private dir: group- or world-writable directories are refused with the chmod that fixes them") {
  TempDir t("private");
  DirectoryCheck c = check_private_directory(make_dir(t.file("g"), 0770));
  CHECK_FALSE(c.ok);
  CHECK(c.problem == t.file("g") + " is writable by group (mode 0770): they could put files there for this process to load");
  CHECK(c.fix == "chmod go-w " + t.file("g"));
  c = check_private_directory(make_dir(t.file("o"), 0703));
  CHECK_FALSE(c.ok);
  CHECK(contains(c.problem, t.file("o") + " is writable by others (mode 0703)"));
  c = check_private_directory(make_dir(t.file("go"), 01777));  // sticky does not make the cache itself private
  CHECK_FALSE(c.ok);
  CHECK(contains(c.problem, "is writable by group and others (mode 1777)"));
  CHECK(detail::refusal_reason(c, "JITBRIDGE_CACHE_DIR") ==
        c.problem + "; fix: chmod go-w " + t.file("go") + ", or set JITBRIDGE_CACHE_DIR to a directory of your own");
}

TEST_CASE("private dir: an ancestor writable by others needs the sticky bit (as /tmp has)") {
  TempDir t("private");
  make_dir(t.file("open"), 0777);
  make_dir(t.path + "/open/cache", 0700);
  DirectoryCheck c = check_private_directory(t.path + "/open/cache");
  CHECK_FALSE(c.ok);
  CHECK(c.problem == t.file("open") +
                         " is writable by group and others (mode 0777) without the sticky bit: they can rename what is in it");
  CHECK(c.fix == "chmod go-w " + t.file("open") + " (or chmod +t " + t.file("open") + ")");
  REQUIRE(::chmod(t.file("open").c_str(), 01777) == 0);
  c = check_private_directory(t.path + "/open/cache");
  CHECK(c.ok);
  CHECK(c.problem.empty());
}

TEST_CASE("private dir: a directory or an ancestor owned by another user is refused") {
  if (!can_chown()) return;
  TempDir t("private");
  make_dir(t.file("theirs"), 0700);
  REQUIRE(::chown(t.file("theirs").c_str(), kOther, static_cast<gid_t>(-1)) == 0);
  DirectoryCheck c = check_private_directory(t.file("theirs"));
  CHECK_FALSE(c.ok);
  CHECK(c.problem == t.file("theirs") + " is owned by " + DirectoryTrust::describe_user(kOther) + ", not by you, " +
                         DirectoryTrust::describe_user(::geteuid()));
  CHECK(contains(c.problem, "uid 65534"));
  CHECK(c.fix.empty());
  // As an ancestor: even mode 0755 lets its owner rename what is inside.
  REQUIRE(::chmod(t.file("theirs").c_str(), 0755) == 0);
  make_dir(t.path + "/theirs/mine", 0700);
  c = check_private_directory(t.path + "/theirs/mine");
  CHECK_FALSE(c.ok);
  CHECK(contains(c.problem, t.file("theirs") + " is owned by " + DirectoryTrust::describe_user(kOther) +
                                ", neither you, " + DirectoryTrust::describe_user(::geteuid()) + ", nor root"));
}

TEST_CASE("private dir: a symlink is followed a component at a time and its target's chain is checked") {
  TempDir t("private");
  make_dir(t.file("open"), 0777);
  make_dir(t.path + "/open/target", 0700);
  make_dir(t.file("good"), 0700);
  REQUIRE(::symlink((t.path + "/open/target").c_str(), t.file("to-open").c_str()) == 0);
  REQUIRE(::symlink("good", t.file("to-good").c_str()) == 0);  // relative
  DirectoryCheck c = check_private_directory(t.file("to-open"));
  CHECK_FALSE(c.ok);
  CHECK(contains(c.problem, t.file("open") + " is writable by group and others (mode 0777) without the sticky bit"));
  c = check_private_directory(t.file("to-good"));
  CHECK(c.ok);
  CHECK(c.path == t.file("good"));
  // A loop, and a file where a directory should be.
  REQUIRE(::symlink("loop", t.file("loop").c_str()) == 0);
  c = check_private_directory(t.file("loop"));
  CHECK_FALSE(c.ok);
  CHECK(contains(c.problem, "too many levels of symbolic links"));
  REQUIRE(::close(::open(t.file("file").c_str(), O_WRONLY | O_CREAT, 0600)) == 0);
  c = check_private_directory(t.path + "/file/cache");
  CHECK_FALSE(c.ok);
  CHECK(c.problem == t.file("file") + " is not a directory");
}

TEST_CASE("private dir: a trusted group may share a directory it owns and writes; nobody else gains") {
  std::string error;
  CHECK_FALSE(DirectoryTrust::of_group("no-such-group-jitbridge", error));
  CHECK(error == "'no-such-group-jitbridge' names no group on this machine");
  if (!can_chown()) return;
  std::optional<DirectoryTrust> users = DirectoryTrust::of_group("users", error);
  if (!users) users = DirectoryTrust::of_group("daemon", error);
  REQUIRE(users);
  const gid_t gid = *users->group;
  CHECK(users->owner_ok(::geteuid()));
  CHECK_FALSE(users->owner_ok(kOther));  // nobody is in neither group
  CHECK(DirectoryTrust::of_group(std::to_string(gid), error)->group == gid);  // a number works too
  TempDir t("private");
  make_dir(t.file("shared"), 02770);
  REQUIRE(::chown(t.file("shared").c_str(), static_cast<uid_t>(-1), gid) == 0);
  REQUIRE(::chmod(t.file("shared").c_str(), 02770) == 0);
  CHECK_FALSE(check_private_directory(t.file("shared")).ok);  // without the setting: refused
  CHECK(check_private_directory(t.file("shared"), *users).ok);
  // Writable by some other group, or by others: still refused.
  REQUIRE(::chown(t.file("shared").c_str(), static_cast<uid_t>(-1), kOther) == 0);
  CHECK_FALSE(check_private_directory(t.file("shared"), *users).ok);
  REQUIRE(::chown(t.file("shared").c_str(), static_cast<uid_t>(-1), gid) == 0);
  REQUIRE(::chmod(t.file("shared").c_str(), 02777) == 0);
  DirectoryCheck c = check_private_directory(t.file("shared"), *users);
  CHECK_FALSE(c.ok);
  CHECK(c.fix == "chmod o-w " + t.file("shared"));
  // Made under create: the group's, setgid, group-writable.
  c = check_private_directory(t.path + "/made", *users, true);
  REQUIRE(c.ok);
  struct stat st;
  REQUIRE(::lstat((t.path + "/made").c_str(), &st) == 0);
  CHECK(st.st_gid == gid);
  CHECK((st.st_mode & 07777) == 02770);
}

TEST_CASE("private dir: the cache over another user's directory loads nothing, stores nothing, warns once") {
  if (!can_chown()) return;
  NoFdLeak fds;
  TempDir t("private");
  const std::string dir = t.file("cache");
  {
    Cache good(CacheConfig{true, dir, 1 << 30});
    REQUIRE(compile(kSource, sm90(), &good)->origin == Origin::compiled);
    REQUIRE(good.info().entries == 1);
  }
  const std::vector<std::string> before = names_in(dir + "/v1");
  // The same directory, now another user's (and so theirs to fill): the entry there is not loaded.
  REQUIRE(::chown(dir.c_str(), kOther, static_cast<gid_t>(-1)) == 0);
  CapturedWarnings warnings;
  Cache cache(CacheConfig{true, dir, 1 << 30});
  std::shared_ptr<const Program> p = compile(kSource, sm90(), &cache);
  CHECK(p->origin == Origin::compiled);  // a correct compile without the disk
  CHECK(p->kernels.size() == 1);
  CHECK(compile(kSource, sm90(), &cache)->origin == Origin::memory_cache);
  const std::string reason = dir + " is owned by " + DirectoryTrust::describe_user(kOther) + ", not by you, " +
                             DirectoryTrust::describe_user(::geteuid()) +
                             "; fix: set JITBRIDGE_CACHE_DIR to a directory of your own";
  REQUIRE(warnings.messages.size() == 1);
  CHECK(warnings.messages[0] == "kernel cache directory " + dir + " is unusable: " + reason + "; caching in memory only");
  const CacheInfo info = cache.info();
  CHECK_FALSE(info.disk);
  CHECK(info.disk_reason == reason);
  CHECK(info.entries == 0);   // not listed
  CHECK(cache.clear() == 0);  // nor emptied
  CHECK(warnings.messages.size() == 1);
  CHECK(names_in(dir + "/v1") == before);  // nothing added, nothing removed
}

TEST_CASE("private dir: a world-writable cache directory and one under an open ancestor are refused in info()") {
  TempDir t("private");
  make_dir(t.file("open"), 0777);
  CapturedWarnings warnings;
  Cache cache(CacheConfig{true, t.path + "/open/cache", 1 << 30});
  const CacheInfo info = cache.info();  // checks without making anything
  CHECK_FALSE(info.disk);
  CHECK(contains(info.disk_reason, t.file("open") + " is writable by group and others (mode 0777) without the sticky bit"));
  CHECK(contains(info.disk_reason, "fix: chmod go-w " + t.file("open") + " (or chmod +t " + t.file("open") +
                                       "), or set JITBRIDGE_CACHE_DIR to a directory of your own"));
  CHECK(warnings.messages.size() == 1);
  struct stat st;
  CHECK(::lstat((t.path + "/open/cache").c_str(), &st) != 0);
  // A fresh, good directory: info() does not make it, and says the disk is on.
  Cache fine(CacheConfig{true, t.path + "/fine", 1 << 30});
  CHECK(fine.info().disk);
  CHECK(fine.info().disk_reason.empty());
  CHECK(::lstat((t.path + "/fine").c_str(), &st) != 0);
  CHECK(warnings.messages.size() == 1);
}

TEST_CASE("private dir: an entry or lock file owned by another user is never used; the entry is replaced") {
  if (!can_chown()) return;
  NoFdLeak fds;
  TempDir t("private");
  const std::string dir = t.file("cache");
  {
    Cache c(CacheConfig{true, dir, 1 << 30});
    c.impl().store("k", record_with("mine"));
  }
  const std::string entry = dir + "/v1/k.jbc";
  std::string bytes;
  REQUIRE(detail::read_entry_file(entry, kMaxCacheEntryBytes, bytes));
  REQUIRE(::chown(entry.c_str(), kOther, static_cast<gid_t>(-1)) == 0);  // as if they had planted it
  CHECK_FALSE(detail::read_entry_file(entry, kMaxCacheEntryBytes, bytes));
  Cache cache(CacheConfig{true, dir, 1 << 30});
  CHECK_FALSE(cache.impl().lookup("k"));
  CHECK(cache.info().disk);  // a bad entry is a miss, not a bad directory
  cache.impl().store("k", record_with("replaced"));
  Cache fresh(CacheConfig{true, dir, 1 << 30});
  std::shared_ptr<const Program> hit = fresh.impl().lookup("k");
  REQUIRE(hit);
  CHECK(hit->cubin == "replaced");
  // A lock file another user holds the key to (they could keep it locked to stall every compile).
  const std::string lock = dir + "/v1/k.lock";
  REQUIRE(::close(::open(lock.c_str(), O_WRONLY | O_CREAT, 0600)) == 0);
  REQUIRE(::chown(lock.c_str(), kOther, static_cast<gid_t>(-1)) == 0);
  detail::CacheLock l;
  CHECK(l.try_lock(lock) == detail::CacheLock::Try::unavailable);
  int calls = 0;
  bool waited = true;
  CHECK(detail::take_turn(lock, 3600, [&] { return ++calls, false; }, l, &waited) == detail::Turn::alone);
  CHECK(calls == 0);
  CHECK_FALSE(waited);
}

TEST_CASE("private dir: the check runs once per cache, not per hit (a hit costs what it did)") {
  TempDir t("private");
  const std::string dir = t.file("cache");
  {
    Cache writer(CacheConfig{true, dir, 1 << 30});
    writer.impl().store("a", record_with("first"));
    writer.impl().store("b", record_with("second"));
  }
  CapturedWarnings warnings;
  Cache cache(CacheConfig{true, dir, 1 << 30});
  REQUIRE(cache.impl().lookup("a"));  // the first use checks the directory, and it passes
  // Opened up afterwards: a check per lookup would now refuse the directory. None runs, so the disk hit stands.
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  std::shared_ptr<const Program> b = cache.impl().lookup("b");
  REQUIRE(b);
  CHECK(b->origin == Origin::disk_cache);
  CHECK(cache.info().disk);
  CHECK(warnings.messages.empty());
  // A new cache (a new process) checks again and refuses it.
  Cache next(CacheConfig{true, dir, 1 << 30});
  CHECK_FALSE(next.impl().lookup("b"));
  CHECK_FALSE(next.info().disk);
  CHECK(warnings.messages.size() == 1);
  ::chmod(dir.c_str(), 0700);
}
