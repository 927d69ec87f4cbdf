// temp_dir.hpp — a fresh directory under /tmp for one test, removed with everything in it when the test's scope ends.
#pragma once

#include <catch2/catch.hpp>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace jitbridge::testing {

namespace temp_dir_detail {

// Removes what the directory open as `fd` holds, and closes `fd`. Each directory below gets its owner's rwx back
// before it is opened (a test may have made it read-only or unsearchable; a non-root user needs both to empty
// it). Symlinks are removed, never followed; FIFOs and devices are unlinked, never opened. Best effort: what
// cannot be removed stays. Allocates nothing, never throws.
inline void empty_directory(int fd) noexcept {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  while (const dirent* e = ::readdir(d)) {
    const char* name = e->d_name;
    if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
    struct stat st;
    if (::fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (::fchmodat(fd, name, S_IRWXU, 0) != 0) {
        // Best effort: opening or emptying it may still work (root, or its mode was already enough).
      }
      const int sub = ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) empty_directory(sub);
      ::unlinkat(fd, name, AT_REMOVEDIR);
    } else {
      ::unlinkat(fd, name, 0);
    }
  }
  ::closedir(d);
}

}  // namespace temp_dir_detail

// Made by mkdtemp as /tmp/jitbridge-<tag>-XXXXXX (a failure is a failed REQUIRE). The destructor removes the
// directory and everything in it, whatever modes the test left (temp_dir_detail::empty_directory); it never
// throws, and says on stderr if the directory could not be removed.
struct TempDir {
  std::string path;
  explicit TempDir(const char* tag = "test") : path(std::string("/tmp/jitbridge-") + tag + "-XXXXXX") {
    REQUIRE(::mkdtemp(path.data()));
  }
  ~TempDir() {
    if (::chmod(path.c_str(), S_IRWXU) != 0) {
      // Best effort, as for the directories inside.
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) temp_dir_detail::empty_directory(fd);
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
      ::fprintf(stderr, "TempDir: %s is left behind: %s\n", path.c_str(), ::strerror(errno));
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const char* name) const { return path + "/" + name; }
};

}  // namespace jitbridge::testing
