// fd_count.hpp — counting this process's open descriptors, for tests that must not leak one.
#pragma once

#include <catch2/catch.hpp>
#include <dirent.h>

#include "pch.hpp"

namespace jitbridge::testing {

// Open descriptors of this process (the directory stream's own one is counted alike each time).
inline int open_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// Checks, when the test's scope ends, that it left no descriptor open. What the library keeps open for the process's
// life is opened first: the lock of this process's PCH directory (jit/src/pch.cpp), which any compile may make.
struct NoFdLeak {
  int before = (jitbridge::detail::pch_directory(), open_fds());
  ~NoFdLeak() { CHECK(open_fds() == before); }
};

}  // namespace jitbridge::testing
