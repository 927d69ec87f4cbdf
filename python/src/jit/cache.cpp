// cache.cpp — cache_info() and cache_clear(): the process-wide kernel cache (memory + disk); _check_private_directory
// (the cache's rule for a directory code is loaded from, for the torch add-on's build cache).
#include <cstdlib>
#include <optional>

#include "bindings.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/private_dir.hpp"

namespace jitbridge::python {

void bind_cache(py::module_& m) {
  m.def(
      "cache_info",
      [] {
        CacheInfo info;
        {
          py::gil_scoped_release release;
          info = Cache::global().info();
        }
        py::dict d;
        d["directory"] = text(info.directory);
        d["disk"] = info.disk;
        d["disk_reason"] = text(info.disk_reason);
        d["trust_group"] = info.trust_group.empty() ? py::object(py::none()) : py::object(text(info.trust_group));
        d["entries"] = info.entries;
        d["bytes"] = info.bytes;
        d["memory_entries"] = info.memory_entries;
        d["compiles"] = info.compiles;
        d["links"] = info.links;
        d["lock_waits"] = info.lock_waits;
        d["lock_timeouts"] = info.lock_timeouts;
        return d;
      },
      R"(The process-wide kernel cache, as a dict:
directory       where entries are kept on disk ($JITBRIDGE_CACHE_DIR, else $XDG_CACHE_HOME/jitbridge,
                else ~/.cache/jitbridge); read once, at the cache's first use in this process.
disk            whether the disk side is on (off with JITBRIDGE_CACHE=0, or a directory that is unusable
                or not private: another user's, writable by others, or under a directory others can
                write without the sticky bit); the first call checks the directory.
disk_reason     why disk is off ("" when on): the rule the directory broke and how to fix it.
trust_group     $JITBRIDGE_CACHE_TRUST_GROUP: the group whose members share the directory, or None.
entries, bytes  what the directory holds now (all processes' entries).
memory_entries  programs this process holds in memory.
compiles        compile() misses this process ran NVRTC for (one per program), since it started;
links           link() misses it ran nvJitLink for;
lock_waits      misses that found another process (or thread) compiling the same key and waited
                for its entry (JITBRIDGE_CACHE_LOCK_TIMEOUT, default 300 s);
lock_timeouts   waits that ran out and compiled themselves.)");
  m.def(
      "cache_clear",
      [] {
        py::gil_scoped_release release;
        return Cache::global().clear();
      },
      "Remove every cache entry, in memory and on disk. Returns the number of disk entries removed. "
      "Programs already returned stay usable.");
  m.def(
      "_check_private_directory",
      [](const std::string& path, bool create) {
        detail::DirectoryCheck check;
        std::string trust_error;
        {
          py::gil_scoped_release release;
          std::optional<detail::DirectoryTrust> trust = detail::DirectoryTrust();
          const char* group = std::getenv("JITBRIDGE_CACHE_TRUST_GROUP");
          if (group && *group) trust = detail::DirectoryTrust::of_group(group, trust_error);
          if (trust) check = detail::check_private_directory(path, *trust, create);
        }
        py::dict d;
        d["ok"] = check.ok;
        d["exists"] = check.exists;
        d["path"] = text(check.path);
        d["problem"] = text(trust_error.empty() ? check.problem : "JITBRIDGE_CACHE_TRUST_GROUP: " + trust_error);
        d["fix"] = text(check.fix);
        return d;
      },
      py::arg("path"), py::arg("create") = false,
      R"(May code be loaded from directory `path`: the kernel cache's check (owned by the user, or a member of
$JITBRIDGE_CACHE_TRUST_GROUP; writable by no one else; every ancestor owned by the user or root and, if
writable by others, sticky). `create`: make it (mode 0700) and missing parents first. Returns a dict: ok,
exists, path (absolute, symlinks resolved), problem (the rule broken, naming the directory; "" when ok),
fix (a command that repairs it, or ""). For jitbridge.torch's add-on build cache; raises nothing but
MemoryError.)");
}

}  // namespace jitbridge::python
