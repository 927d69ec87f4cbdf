// private_dir.cpp — check_private_directory(): the StrictModes-style check of a directory jitbridge loads code from (docs/DESIGN.md, "Cache").
#include "jitbridge/private_dir.hpp"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

namespace jitbridge::detail {
namespace {

constexpr int kMaxLinks = 40;  // as the kernel's ELOOP bound

// Calls `get(buffer)` (a getpwuid_r-style lookup returning its error number) with a buffer that grows
// on ERANGE; the result's error number.
template <class Get>
int with_buffer(std::vector<char>& buf, Get get) {
  buf.resize(4096);
  for (;;) {
    const int rc = get(buf);
    if (rc != ERANGE || buf.size() >= (1u << 24)) return rc;
    buf.resize(buf.size() * 4);
  }
}

std::optional<std::string> user_name(uid_t uid, gid_t* primary = nullptr) {
  std::vector<char> buf;
  passwd pw{}, *found = nullptr;
  if (with_buffer(buf, [&](std::vector<char>& b) { return ::getpwuid_r(uid, &pw, b.data(), b.size(), &found); }) != 0 ||
      !found)
    return std::nullopt;
  if (primary) *primary = pw.pw_gid;
  return std::string(pw.pw_name);
}

bool in_group(uid_t uid, gid_t group) {
  static std::mutex mutex;
  static std::map<std::pair<gid_t, uid_t>, bool> known;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find({group, uid}); it != known.end()) return it->second;
  }
  bool member = false;
  gid_t primary = 0;
  if (std::optional<std::string> name = user_name(uid, &primary)) {
    member = primary == group;
    std::vector<char> buf;
    struct group gr{}, *found = nullptr;
    if (!member &&
        with_buffer(buf, [&](std::vector<char>& b) { return ::getgrgid_r(group, &gr, b.data(), b.size(), &found); }) == 0 &&
        found)
      for (char** m = gr.gr_mem; m && *m && !member; ++m) member = *name == *m;
  }
  std::lock_guard<std::mutex> lock(mutex);
  known[{group, uid}] = member;
  return member;
}

std::string mode_text(mode_t mode) { return fmt::format("mode {:04o}", mode & 07777); }

// "group", "others" or "group and others": who besides the owner may write, by `mode`.
std::string writers(mode_t mode) {
  const bool g = mode & S_IWGRP, o = mode & S_IWOTH;
  return g && o ? "group and others" : g ? "group" : "others";
}

struct Walk {
  const DirectoryTrust& trust;
  DirectoryCheck out;

  bool fail(std::string problem, std::string fix = {}) {
    out.ok = false;
    out.problem = std::move(problem);
    out.fix = std::move(fix);
    return false;
  }

  // `dir` (lstat'ed as `st`) on the way to the checked directory.
  bool ancestor_ok(const std::string& dir, const struct stat& st) {
    if (st.st_uid != 0 && !trust.owner_ok(st.st_uid))
      return fail(fmt::format("{} is owned by {}, neither you, {}, nor root{}: its owner can rename what is in it",
                              dir, DirectoryTrust::describe_user(st.st_uid), DirectoryTrust::describe_user(trust.self),
                              trust.group ? fmt::format(" nor a member of group {}", trust.group_name) : ""));
    const bool sticky = st.st_mode & S_ISVTX;
    const bool group_trusted = trust.group && st.st_gid == *trust.group;
    const bool bad_group = (st.st_mode & S_IWGRP) && !group_trusted;
    if (!sticky && (bad_group || (st.st_mode & S_IWOTH))) {
      const mode_t shown = st.st_mode & (group_trusted ? ~mode_t{S_IWGRP} : ~mode_t{0});
      return fail(fmt::format("{} is writable by {} ({}) without the sticky bit: they can rename what is in it",
                              dir, writers(shown), mode_text(st.st_mode)),
                  fmt::format("chmod {}-w {} (or chmod +t {})", group_trusted ? "o" : "go", dir, dir));
    }
    return true;
  }

  // The checked directory itself.
  bool final_ok(const std::string& dir, const struct stat& st) {
    if (!trust.owner_ok(st.st_uid))
      return fail(fmt::format("{} is owned by {}, not by you, {}{}", dir, DirectoryTrust::describe_user(st.st_uid),
                              DirectoryTrust::describe_user(trust.self),
                              trust.group ? fmt::format(" nor a member of group {}", trust.group_name) : ""));
    const bool group_trusted = trust.group && st.st_gid == *trust.group;
    if ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && !group_trusted)) {
      const mode_t shown = st.st_mode & (group_trusted ? ~mode_t{S_IWGRP} : ~mode_t{0});
      return fail(fmt::format("{} is writable by {} ({}): they could put files there for this process to load", dir,
                              writers(shown), mode_text(st.st_mode)),
                  fmt::format("chmod {}-w {}", group_trusted ? "o" : "go", dir));
    }
    return true;
  }

  // Makes `dir` (its parent checked); true when it is there now.
  bool make(const std::string& dir) {
    const bool shared = trust.group.has_value();
    if (::mkdir(dir.c_str(), 0700) != 0) return errno == EEXIST;
    if (shared) {  // the group's members share it: theirs to write, new entries inherit the group
      if (::chown(dir.c_str(), static_cast<uid_t>(-1), *trust.group) != 0 || ::chmod(dir.c_str(), 02770) != 0)
        return true;  // left 0700: private, and the check below still applies
    }
    return true;
  }

  bool run(const std::string& path, bool create, unsigned private_levels) {
    std::string abs = path;
    if (abs.empty()) return fail("the directory name is empty");
    if (abs[0] != '/') {
      char* cwd = ::getcwd(nullptr, 0);
      if (!cwd) return fail(fmt::format("{} is relative and the working directory is unknown ({})", path,
                                        std::strerror(errno)));
      abs = std::string(cwd) + "/" + abs;
      std::free(cwd);
    }
    // Components still to walk, the next one last.
    std::vector<std::string> todo;
    auto push_components = [&todo](const std::string& p) {
      std::vector<std::string> parts;
      std::size_t start = 0;
      while (start <= p.size()) {
        std::size_t end = p.find('/', start);
        if (end == std::string::npos) end = p.size();
        if (end > start) parts.push_back(p.substr(start, end - start));
        start = end + 1;
      }
      todo.insert(todo.end(), parts.rbegin(), parts.rend());
    };
    push_components(abs);
    std::string cur = "/";
    struct stat st;
    if (::lstat("/", &st) != 0) return fail(fmt::format("/ cannot be examined ({})", std::strerror(errno)));
    if (!ancestor_ok("/", st)) return false;
    int links = 0;
    std::vector<std::string> deferred;  // directories whose ancestor check waits for the end
    while (!todo.empty()) {
      const std::string c = std::move(todo.back());
      todo.pop_back();
      if (c == ".") continue;
      if (c == "..") {
        const std::size_t slash = cur.rfind('/');
        cur = slash == 0 ? "/" : cur.substr(0, slash);  // already checked on the way down
        continue;
      }
      const std::string next = cur == "/" ? "/" + c : cur + "/" + c;
      if (::lstat(next.c_str(), &st) != 0) {
        if (errno != ENOENT) return fail(fmt::format("{} cannot be examined ({})", next, std::strerror(errno)));
        // Private levels that are there already: judged now, before anything is made in them.
        for (const std::string& dir : deferred)
          if (::lstat(dir.c_str(), &st) != 0 || !final_ok(dir, st))
            return out.problem.empty() ? fail(fmt::format("{} cannot be examined ({})", dir, std::strerror(errno)))
                                       : false;
        if (!create) {  // `cur` and its chain are fine: the rest would be made there, mode 0700
          out.ok = true;
          out.exists = false;
          out.path = next;
          for (auto it = todo.rbegin(); it != todo.rend(); ++it) out.path += "/" + *it;
          return true;
        }
        if (!make(next)) return fail(fmt::format("{} cannot be created ({})", next, std::strerror(errno)));
        if (::lstat(next.c_str(), &st) != 0)
          return fail(fmt::format("{} cannot be examined ({})", next, std::strerror(errno)));
      }
      if (S_ISLNK(st.st_mode)) {
        // The link sits in `cur`, which passed: follow it, checking every directory its target passes.
        if (++links > kMaxLinks) return fail(fmt::format("{}: too many levels of symbolic links", next));
        std::string target(static_cast<std::size_t>(std::max<off_t>(st.st_size, 0)) + 256, '\0');
        const ssize_t n = ::readlink(next.c_str(), target.data(), target.size());
        if (n < 0 || static_cast<std::size_t>(n) >= target.size())
          return fail(fmt::format("the symbolic link {} cannot be read ({})", next, std::strerror(n < 0 ? errno : ENAMETOOLONG)));
        target.resize(static_cast<std::size_t>(n));
        if (!target.empty() && target[0] == '/') cur = "/";
        push_components(target);
        continue;
      }
      if (!S_ISDIR(st.st_mode)) return fail(fmt::format("{} is not a directory", next));
      // One of the last `private_levels` names: judged below by the stricter rules of the directory
      // itself, with its message (and as an ancestor after all if a symlink or ".." moves it out).
      const auto names_left = static_cast<std::size_t>(std::count_if(
          todo.begin(), todo.end(), [](const std::string& n) { return n != "."; }));
      if (names_left < private_levels) deferred.push_back(next);
      else if (!todo.empty() && !ancestor_ok(next, st)) return false;
      cur = next;
    }
    // `cur` is the directory, symlinks resolved; the checks above saw it as an ancestor at most. It
    // and its `private_levels - 1` nearest parents must be private, the outermost judged first.
    out.path = cur;
    std::vector<std::string> own{cur};
    while (own.size() < private_levels && own.back() != "/") {
      const std::size_t slash = own.back().rfind('/');
      own.push_back(slash == 0 ? "/" : own.back().substr(0, slash));
    }
    for (const std::string& dir : deferred) {
      if (std::find(own.begin(), own.end(), dir) != own.end()) continue;
      if (::lstat(dir.c_str(), &st) != 0) return fail(fmt::format("{} cannot be examined ({})", dir, std::strerror(errno)));
      if (!ancestor_ok(dir, st)) return false;
    }
    for (auto it = own.rbegin(); it != own.rend(); ++it) {
      if (::lstat(it->c_str(), &st) != 0)
        return fail(fmt::format("{} cannot be examined ({})", *it, std::strerror(errno)));
      if (!S_ISDIR(st.st_mode)) return fail(fmt::format("{} is not a directory", *it));
      if (!final_ok(*it, st)) return false;
    }
    out.ok = true;
    out.exists = true;
    return true;
  }
};

}  // namespace

DirectoryTrust::DirectoryTrust() : self(::geteuid()) {}

std::optional<DirectoryTrust> DirectoryTrust::of_group(const std::string& name, std::string& error) {
  std::vector<char> buf;
  struct group gr{}, *found = nullptr;
  const int rc = with_buffer(buf, [&](std::vector<char>& b) { return ::getgrnam_r(name.c_str(), &gr, b.data(), b.size(), &found); });
  std::optional<gid_t> gid;
  if (rc == 0 && found) {
    gid = gr.gr_gid;
  } else if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos && name.size() < 10) {
    const gid_t g = static_cast<gid_t>(std::strtoul(name.c_str(), nullptr, 10));
    found = nullptr;
    if (with_buffer(buf, [&](std::vector<char>& b) { return ::getgrgid_r(g, &gr, b.data(), b.size(), &found); }) == 0 && found)
      gid = g;
  }
  if (!gid) {
    error = fmt::format("'{}' names no group on this machine", name);
    return std::nullopt;
  }
  DirectoryTrust t;
  t.group = gid;
  t.group_name = found ? found->gr_name : name;
  return t;
}

bool DirectoryTrust::owner_ok(uid_t uid) const { return uid == self || (group && in_group(uid, *group)); }

std::string DirectoryTrust::describe_user(uid_t uid) {
  std::optional<std::string> name = user_name(uid);
  return name ? fmt::format("{} (uid {})", *name, uid) : fmt::format("uid {}", uid);
}

DirectoryCheck check_private_directory(const std::string& path, const DirectoryTrust& trust, bool create,
                                       unsigned private_levels) {
  Walk w{trust, {}};
  w.run(path, create, private_levels);
  return std::move(w.out);
}

std::string refusal_reason(const DirectoryCheck& check, const std::string& setting) {
  return fmt::format("{}; fix: {}set {} to a directory of your own", check.problem, check.fix.empty() ? "" : check.fix + ", or ",
                     setting);
}

}  // namespace jitbridge::detail
