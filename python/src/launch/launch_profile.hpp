// launch_profile.hpp — optional cycle counts per phase of the Python launch path, taken in place
// (between real launches, caches as cold as they really are). Built with
// -DJITBRIDGE_LAUNCH_PROFILE=ON only; otherwise every mark compiles to nothing.
#pragma once

#include <pybind11/pybind11.h>

namespace jitbridge::python::launch_profile {

// The points a launch passes, in order. `entry` also closes the "python" interval: the time from
// the previous launch's `released` to this call's entry (the caller's own Python).
enum Point { entry, parsed, stream, converted, packed, validated, launched, released, kPoints };

#ifdef JITBRIDGE_LAUNCH_PROFILE
void mark(Point p) noexcept;
#else
inline void mark(Point) noexcept {}
#endif

// _core._launch_profile(reset=False): mean nanoseconds per launch of each interval (a dict), or
// None when the build has no profiling. Registered always.
void bind(pybind11::module_& m);

}  // namespace jitbridge::python::launch_profile
