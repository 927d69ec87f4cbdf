// testing.hpp — what jitbridge_testing's files share: _core's _internals table and each file's bindings.
#pragma once

#include "bindings.hpp"
#include "internals.hpp"

namespace jitbridge::python {

// _core's table, checked against the one this module was built with (jitbridge_testing.cpp). Throws
// std::runtime_error on a mismatch: the import then fails with an ImportError saying why.
const JitbridgeInternals& core_internals();

// The launch benchmarks' floors and phase timings (launch_floors.cpp).
void bind_launch_floors(py::module_& m);

}  // namespace jitbridge::python
