// jitbridge/c_api.hpp — the C++ side of the C interface (c_api.h) for the layers above launch/: the core's table, and
// kernel handles made from what a binding already holds.
#pragma once

#include <memory>
#include <string>

#include "jitbridge/c_api.h"
#include "jitbridge/kernel_plan.hpp"

namespace jitbridge::c_api {

// The table of this copy of the library (kernel_from_python: UNSUPPORTED). Static; never fails.
const JitbridgeCApi& core_table();

// A new kernel handle (one reference, owned by the caller) over `plan` (shared: a RawKernel's plan serves the native
// launches with the Functions its Python launches resolved). Throws std::bad_alloc only.
jitbridge_kernel* make_kernel(std::shared_ptr<const KernelPlan> plan);

// Records `code` and `message` as the calling thread's last error (last_error()); returns `code`. Never throws.
int set_error(int code, const char* message, int cuda_result = 0) noexcept;

}  // namespace jitbridge::c_api
