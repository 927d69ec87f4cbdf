// dependencies.cpp — records the header files a compile read and checks later that they are unchanged.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <set>

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

bool is_toolkit_dir(const std::string& dir) {
  for (const std::string& t : toolkit_include_dirs())
    if (dir == t || under(dir, t)) return true;
  return false;
}

bool blank(char c) { return c == ' ' || c == '\t'; }

// True when `text` names other files only through "#include <name>" lines whose name is relative
// and has no "..": every other "include" (a quoted or computed #include, #include_next,
// __has_include, the word in a comment) answers false. NVRTC looks for <name> in the -I
// directories and its in-memory headers only, never the working directory.
bool only_angle_includes(std::string_view text) {
  for (std::size_t at = text.find("include"); at != std::string_view::npos; at = text.find("include", at + 7)) {
    std::size_t b = at;
    while (b > 0 && blank(text[b - 1])) --b;
    if (b == 0 || text[b - 1] != '#') return false;
    for (--b; b > 0 && blank(text[b - 1]);) --b;
    if (b != 0 && text[b - 1] != '\n') return false;
    std::size_t f = at + 7;
    while (f < text.size() && blank(text[f])) ++f;
    if (f >= text.size() || text[f] != '<') return false;
    const std::size_t close = text.find_first_of(">\n", f);
    if (close == std::string_view::npos || text[close] != '>') return false;
    const std::string_view name = text.substr(f + 1, close - f - 1);
    if (name.empty() || name[0] == '/' || name.find("..") != std::string_view::npos ||
        name.find('\\') != std::string_view::npos)
      return false;
  }
  return true;
}

// True when nothing exists at `path` (a missing component, or one that is not a directory).
bool is_absent(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR);
}

// Records that <dir>/<relative> is absent through its first missing ancestor (dir itself, dir/cub,
// ...); nothing when the file exists (then it was not the one this search would find first).
void add_absence(const std::string& dir, std::string_view relative, std::set<std::string>& seen,
                 std::vector<Dependency>& out) {
  std::string path = dir;
  std::size_t at = 0;
  for (;;) {
    if (is_absent(path)) {
      if (seen.insert(path).second) out.push_back({path, 0, 0, ""});
      return;
    }
    if (at >= relative.size()) return;
    std::size_t slash = relative.find('/', at);
    if (slash == std::string_view::npos) slash = relative.size();
    path.append("/").append(relative.substr(at, slash - at));
    at = slash + 1;
  }
}

}  // namespace

std::vector<std::string> include_search_dirs(const std::vector<std::string>& nvrtc_options) {
  std::vector<std::string> out;
  for (const std::string& o : nvrtc_options)
    if (o.size() > 2 && o.compare(0, 2, "-I") == 0) {
      std::string dir = o.substr(2);
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      out.push_back(std::move(dir));
    }
  return out;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<Dependency> record_dependencies(const std::vector<std::string>& trace_paths,
                                            const std::vector<Header>& in_memory,
                                            const std::vector<std::string>& search_dirs, std::string& cwd) {
  std::vector<Dependency> out;
  std::set<std::string> absences;
  std::vector<bool> searched_toolkit;
  for (const std::string& dir : search_dirs) searched_toolkit.push_back(is_toolkit_dir(dir));
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
    // A file put into an earlier search dir under the same relative name would be read instead.
    for (std::size_t k = 0; k < search_dirs.size(); ++k) {
      if (!under(path, search_dirs[k])) continue;
      const std::string_view relative = std::string_view(path).substr(search_dirs[k].size() + 1);
      for (std::size_t j = 0; j < k; ++j)
        if (!searched_toolkit[j] && search_dirs[j] != search_dirs[k])
          add_absence(search_dirs[j], relative, absences, out);
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

bool reads_only_toolkit_headers(std::string_view source, const std::vector<Header>& in_memory,
                                const std::vector<std::string>& nvrtc_options) {
  for (const std::string& o : nvrtc_options) {
    if (o.rfind("-I", 0) == 0) {
      if (!is_toolkit_dir(o.substr(2))) return false;
    } else if (o.find("include") != std::string::npos) {
      return false;  // --pre-include and the like
    }
  }
  if (!only_angle_includes(source)) return false;
  for (const Header& h : in_memory)
    if (!only_angle_includes(h.text)) return false;
  return true;
}

bool dependencies_unchanged(const CacheRecord& record) {
  if (!record.cwd.empty()) {
    char buf[4096];
    if (!::getcwd(buf, sizeof buf) || record.cwd != buf) return false;
  }
  std::string contents;
  for (const Dependency& d : record.deps) {
    if (d.absent()) {
      if (!is_absent(d.path)) return false;
      continue;
    }
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
