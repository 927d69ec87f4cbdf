// allocators.hpp — Python objects with allocate(size, stream) / deallocate(ptr, size, stream) (cuda.core's
// MemoryResource shape) as jitbridge's DeviceAllocator, and the allocator= argument of the output functions.
#pragma once

#include <memory>
#include <string>

#include "bindings.hpp"
#include "jitbridge/device_allocator.hpp"

namespace jitbridge::python {

// The DeviceAllocator for an `allocator=` argument: null for None (the allocator that applies now). `arg` names it
// in the TypeError for an object without allocate/deallocate ("empty(allocator)"), `label` (default: `arg`) in the
// errors of its later allocations. GIL held.
std::shared_ptr<DeviceAllocator> allocator_argument(py::handle allocator, const char* arg,
                                                    const char* label = nullptr);

void bind_allocators(py::module_& m);

}  // namespace jitbridge::python
