// test_temp_dir.cpp — TempDir (temp_dir.hpp) removes its whole tree, whatever modes, FIFOs and symlinks a test left.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "temp_dir.hpp"

using jitbridge::testing::TempDir;

namespace {

constexpr uid_t kOther = 65534;  // nobody: not root, so no permission check is bypassed

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool put(const std::string& path) {
  std::ofstream out(path);
  out << "x";
  return static_cast<bool>(out);
}

// Leaves in `dir` what tests leave: a read-only directory holding a file, a symlink to `outside` and a read-only
// directory with a FIFO; a directory with no permissions at all holding a file; `dir` itself read-only.
bool fill(const std::string& dir, const std::string& outside) {
  return ::mkdir((dir + "/ro").c_str(), 0700) == 0 && put(dir + "/ro/file") &&
         ::symlink(outside.c_str(), (dir + "/ro/link").c_str()) == 0 &&
         ::mkdir((dir + "/ro/deeper").c_str(), 0700) == 0 && ::mkfifo((dir + "/ro/deeper/fifo").c_str(), 0600) == 0 &&
         ::mkdir((dir + "/none").c_str(), 0700) == 0 && put(dir + "/none/file") &&
         ::chmod((dir + "/ro/deeper").c_str(), 0500) == 0 && ::chmod((dir + "/ro").c_str(), 0500) == 0 &&
         ::chmod((dir + "/none").c_str(), 0) == 0 && ::chmod(dir.c_str(), 0500) == 0;
}

// 0 when a TempDir filled by fill() is gone at its scope's end and the symlink's target kept; else the failed step.
int removal_result() {
  try {
    const TempDir outside("temp-dir-outside");
    const std::string keep = outside.file("keep");
    if (!put(keep)) return 2;
    std::string path;
    bool filled = false;
    {
      const TempDir t("temp-dir");
      path = t.path;
      filled = fill(t.path, outside.path);
    }
    if (!filled) return 3;
    if (exists(path)) return 4;
    if (!exists(keep)) return 5;
    return 0;
  } catch (...) {
    return 6;
  }
}

}  // namespace

TEST_CASE("TempDir: read-only and unsearchable directories, FIFOs and symlinks go; what a symlink names stays") {
  CHECK(removal_result() == 0);
}

TEST_CASE("TempDir: a user who is not root (no permission check bypassed) removes the same tree") {
  if (::geteuid() != 0) {
    SUCCEED("not root: the case above already ran without privileges");
    return;
  }
  // In a child that becomes `nobody`: the test process keeps its uid. It reports in its exit status.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::setgid(kOther) != 0 || ::setuid(kOther) != 0) ::_exit(1);
    ::_exit(removal_result());
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  INFO("1: setuid failed, 2: no file, 3: fill failed, 4: the directory stayed, 5: a symlink was followed, 6: threw");
  CHECK(WEXITSTATUS(status) == 0);
}
