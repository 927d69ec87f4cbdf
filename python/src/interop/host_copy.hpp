// host_copy.hpp — host round trips in Python (host_copy.cpp): a host copy for Tensor.__dlpack__, and asarray.
#pragma once

#include "bindings.hpp"
#include "jitbridge/device_tensor.hpp"

namespace jitbridge::python {

// Whether a __dlpack__ dl_device argument asks for host memory: a 2-tuple whose first item is the
// int kDLCPU (1). No Python code runs; never throws.
bool asks_for_host(py::handle dl_device) noexcept;

// Tensor.__dlpack__ for a host consumer (asks_for_host(dl_device)): a capsule of a C-contiguous host
// copy of `tensor` (flag DLPACK_FLAG_BITMASK_IS_COPIED), whose deleter frees the host memory. The copy is
// queued on the tensor's stream (stream None or -1) or on `stream` after it waits for the tensor's
// stream, and the host waits for it before the capsule is returned: a host consumer cannot order
// itself on a stream. Throws BufferError for copy=False and dl_device=(1, n != 0), TypeError/ValueError
// as any __dlpack__ request, NoDriverError/DriverError from the copy.
py::object tensor_dlpack_to_host(const DeviceTensor& tensor, py::handle stream, py::handle max_version,
                                 py::handle dl_device, py::handle copy);

// jitbridge.asarray(x, device=None, stream=None).
void bind_host_copy(py::module_& m);

}  // namespace jitbridge::python
