// cache.cpp — cache_info() and cache_clear(): the process-wide kernel cache (memory + disk).
#include "bindings.hpp"
#include "jitbridge/cache.hpp"

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
        d["entries"] = info.entries;
        d["bytes"] = info.bytes;
        d["memory_entries"] = info.memory_entries;
        return d;
      },
      R"(The process-wide kernel cache, as a dict:
directory       where entries are kept on disk ($JITBRIDGE_CACHE_DIR, else $XDG_CACHE_HOME/jitbridge,
                else ~/.cache/jitbridge); read once, at the cache's first use in this process.
disk            whether the disk side is on (off with JITBRIDGE_CACHE=0 or an unusable directory).
entries, bytes  what the directory holds now (all processes' entries).
memory_entries  programs this process holds in memory.)");
  m.def(
      "cache_clear",
      [] {
        py::gil_scoped_release release;
        return Cache::global().clear();
      },
      "Remove every cache entry, in memory and on disk. Returns the number of disk entries removed. "
      "Programs already returned stay usable.");
}

}  // namespace jitbridge::python
