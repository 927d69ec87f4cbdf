// temp_dir.hpp — a fresh directory under /tmp for one test, removed with everything in it when the test's scope ends.
#pragma once

#include <catch2/catch.hpp>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include <string>

namespace jitbridge::testing {

struct TempDir {
  std::string path;
  explicit TempDir(const char* tag = "test") : path(std::string("/tmp/jitbridge-") + tag + "-XXXXXX") {
    REQUIRE(::mkdtemp(path.data()));
  }
  ~TempDir() {
    ::nftw(path.c_str(), [](const char* p, const struct stat*, int, FTW*) { return ::remove(p); }, 16,
           FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const char* name) const { return path + "/" + name; }
};

}  // namespace jitbridge::testing
