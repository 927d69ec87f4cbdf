// dependencies.cpp — records the header files a compile read and checks later that they are unchanged.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "cache_internal.hpp"
#include "jit_internal.hpp"

namespace jitbridge::detail {
namespace {

// A file whose mtime lies this close to (or after) the moment it was hashed may be rewritten
// within the same timestamp tick; its contents are always hashed again.
constexpr std::int64_t kRacyWindowNs = 2'000'000'000;

bool under(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

}  // namespace

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<Dependency> record_dependencies(const std::vector<std::string>& trace_paths,
                                            const std::vector<Header>& in_memory, std::string& cwd) {
  std::vector<Dependency> out;
  char buf[4096];
  const std::string here = ::getcwd(buf, sizeof buf) ? buf : "";
  for (const std::string& seen : trace_paths) {
    bool is_memory = false;
    for (const Header& h : in_memory) is_memory = is_memory || h.name == seen;
    if (is_memory) continue;
    std::string path = seen;
    if (path.empty() || path[0] != '/') {
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) continue;  // NVRTC's built-in headers
      path = here + "/" + path;
      cwd = here;
    }
    bool toolkit = false;
    for (const std::string& dir : toolkit_include_dirs()) toolkit = toolkit || under(path, dir);
    if (toolkit) continue;
    struct stat st;
    std::string contents;
    if (::stat(path.c_str(), &st) != 0 || !read_file(path, contents)) continue;
    out.push_back({path, static_cast<std::uint64_t>(st.st_size), mtime_ns(st), hash_hex(contents)});
  }
  return out;
}

bool dependencies_unchanged(const CacheRecord& record) {
  if (!record.cwd.empty()) {
    char buf[4096];
    if (!::getcwd(buf, sizeof buf) || record.cwd != buf) return false;
  }
  std::string contents;
  for (const Dependency& d : record.deps) {
    struct stat st;
    if (::stat(d.path.c_str(), &st) != 0) return false;
    bool stat_matches = static_cast<std::uint64_t>(st.st_size) == d.size && mtime_ns(st) == d.mtime_ns;
    // recorded_ns >= 0 (parse_record refuses negative times; now_ns() is positive): no overflow.
    if (stat_matches && d.mtime_ns < record.recorded_ns - kRacyWindowNs) continue;
    if (static_cast<std::uint64_t>(st.st_size) != d.size) return false;
    if (!read_file(d.path, contents) || hash_hex(contents) != d.hash) return false;
  }
  return true;
}

}  // namespace jitbridge::detail
