// testing.hpp — what jitbridge_testing's files share: _core's _internals table, its packed arguments and each file's
// bindings.
#pragma once

#include "bindings.hpp"
#include "internals.hpp"

namespace jitbridge::python {

// _core's table, checked against the one this module was built with (jitbridge_testing.cpp). Throws
// std::runtime_error on a mismatch: the import then fails with an ImportError saying why.
const JitbridgeInternals& core_internals();

// The bytes a launch of `kernel` (a RawKernel) would pass for `args`, one bytes per parameter, through _core's
// _internals.kernel_pack (every check). Throws py::error_already_set (TypeError when `kernel` is no RawKernel, and
// what a launch raises for the arguments).
py::list pack_args(py::handle kernel, const py::tuple& args);

// The launch benchmarks' floors and phase timings (launch_floors.cpp).
void bind_launch_floors(py::module_& m);

}  // namespace jitbridge::python
