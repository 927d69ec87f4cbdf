// jitbridge/private_dir.hpp — may code be loaded from a directory: owned by the user, writable by no one else, its ancestors too (docs/DESIGN.md, "Cache").
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace jitbridge::detail {

// Whose files and directories a check trusts: the user (the effective uid) alone, or also the
// members of one group (a deliberate shared cache, JITBRIDGE_CACHE_TRUST_GROUP). Copyable; never throws
// except std::bad_alloc.
struct DirectoryTrust {
  uid_t self;                 // the effective uid when made
  std::optional<gid_t> group; // trusted besides the user
  std::string group_name;

  DirectoryTrust();
  // Trusts the user and the members of group `name` (a name, or a number); nullopt with `error` set
  // ("... names no group on this machine") when there is no such group.
  static std::optional<DirectoryTrust> of_group(const std::string& name, std::string& error);
  // True for the user, and for members of the trusted group (primary group or listed member, looked
  // up once per uid and remembered for the process).
  bool owner_ok(uid_t uid) const;
  // For messages: "nobody (uid 65534)", or "uid 65534" when the uid has no name.
  static std::string describe_user(uid_t uid);
};

// What check_private_directory found.
struct DirectoryCheck {
  bool ok = false;
  bool exists = false;   // the directory is there (made by this check when asked to create it)
  std::string path;      // the directory, absolute, symlinks resolved ("" when the walk stopped before it)
  std::string problem;   // ok: empty; else the rule broken, naming the directory that broke it
  std::string fix;       // a command that repairs it ("chmod go-w /x"), or empty when there is none
};

// Checks `path` as OpenSSH's StrictModes checks ~/.ssh: the directory must be owned by the user (or,
// with a trusted group, by one of its members) and writable by nobody else (the trusted group may
// write when it owns the directory); every ancestor up to / must be owned by the user, root (or a
// member of the trusted group) and, if writable by group or others, have the sticky bit (as /tmp
// does), unless the trusted group is the one that may write. A relative `path` is taken from the
// working directory. Symlinks are resolved one component at a time, so every directory that a name
// on the way passes through (the one holding each symlink, and the chain its target leads through)
// is checked. A missing directory: with `create`, it and missing parents are made mode 0700 (a
// trusted group: 02770, group set to it) and checked; without, the nearest existing ancestor and
// its chain are checked, and ok comes with exists false. `private_levels` > 1: that many directories
// (the directory and its nearest parents, symlinks resolved) must pass the directory's own rules, as
// the cache's <dir>/v1 does with 2. Costs one lstat per path component and one per private level;
// run it once per directory per process. Never throws except std::bad_alloc.
DirectoryCheck check_private_directory(const std::string& path, const DirectoryTrust& trust = {},
                                       bool create = false, unsigned private_levels = 1);

// The reason a warning about a refused directory gives: "<problem>; fix: <fix>, or set <setting> to
// a directory of your own" (without "<fix>, or " when there is no command for it).
std::string refusal_reason(const DirectoryCheck& check, const std::string& setting);

}  // namespace jitbridge::detail
