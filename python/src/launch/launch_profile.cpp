// launch_profile.cpp — the cycle counters behind launch_profile.hpp (JITBRIDGE_LAUNCH_PROFILE only).
#include "launch/launch_profile.hpp"

#include <chrono>
#include <cstdint>

#ifdef JITBRIDGE_LAUNCH_PROFILE
#include <x86intrin.h>
#endif

namespace jitbridge::python::launch_profile {
namespace py = pybind11;

#ifdef JITBRIDGE_LAUNCH_PROFILE
namespace {
// Touched with the GIL held only.
std::uint64_t g_last = 0;
std::uint64_t g_cycles[kPoints] = {};
std::uint64_t g_launches = 0;
bool g_open = false;  // between `entry` and `released`

double cycles_per_ns() {
  static const double value = [] {
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t c0 = __rdtsc();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20)) {
    }
    const std::uint64_t c1 = __rdtsc();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(c1 - c0) / ns;
  }();
  return value;
}
}  // namespace

void mark(Point p) noexcept {
  const std::uint64_t now = __rdtsc();
  if (p == entry) {
    if (g_last && !g_open) g_cycles[entry] += now - g_last;  // the caller's Python since the last launch
    g_open = true;
  } else if (g_open) {
    g_cycles[p] += now - g_last;
    if (p == released) {
      ++g_launches;
      g_open = false;
    }
  }
  g_last = now;
}
#endif

void bind(py::module_& m) {
  m.def("_launch_profile", [](bool reset) -> py::object {
#ifdef JITBRIDGE_LAUNCH_PROFILE
    static const char* names[kPoints] = {"python",   "parse", "consumer_stream", "convert",
                                         "pack",     "validate", "launch",        "release"};
    py::dict out;
    const double per = cycles_per_ns() * static_cast<double>(g_launches ? g_launches : 1);
    for (int i = 0; i < kPoints; ++i) out[names[i]] = static_cast<double>(g_cycles[i]) / per;
    out["launches"] = g_launches;
    if (reset) {
      for (auto& c : g_cycles) c = 0;
      g_launches = 0;
      g_last = 0;
      g_open = false;
    }
    return out;
#else
    (void)reset;
    return py::none();
#endif
  }, py::arg("reset") = false,
     "Mean ns per launch of each phase of the Python launch path, measured in place; None unless built with "
     "-DJITBRIDGE_LAUNCH_PROFILE=ON.");
}

}  // namespace jitbridge::python::launch_profile
