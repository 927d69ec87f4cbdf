// internals.hpp — the C-level table jitbridge._core exposes as the capsule `_core._internals`, through which the
// test-only extension jitbridge_testing (python/testing/) reads state that only _core's own copy holds.
#pragma once

#include <Python.h>

#include <cstdint>

namespace jitbridge::python {

// Bumped whenever a member of JitbridgeInternals is added, removed or changes meaning. jitbridge_testing refuses a
// table whose version or size differs from the one it was built with (a build tree's jitbridge_testing beside a
// wheel built from another commit).
constexpr std::uint32_t kInternalsVersion = 4;
// The capsule's name (PyCapsule_Import takes "jitbridge._core._internals").
constexpr const char* kInternalsCapsule = "jitbridge._core._internals";

// Plain C calls only: no C++ type and no C++ exception crosses between the two extension modules (each links its
// own copy of jitbridge_core and of the C++ runtime's symbols). Every call needs the GIL; a failure returns the
// value named below with a Python exception set.
struct JitbridgeInternals {
  std::uint32_t version;  // kInternalsVersion of the _core that made the table
  std::uint32_t size;     // sizeof(JitbridgeInternals) there
  // The protocol _core chose for arrays of `type` ("exchange_api", "dlpack", "cuda_array_interface",
  // "cupy_fields", "numba_fields", "jitbridge", "none"), choosing it now if no object of that type was seen.
  // NULL (TypeError) when `type` is not a type. The string is static.
  const char* (*adapter_protocol)(PyObject* type);
  // How _core reads CuPy's current stream: "cupy_backends.cuda.stream.get_stream_ptr" (CuPy's exported C
  // function) or "cupy.cuda.get_current_stream". Never fails; the string is static.
  const char* (*cupy_stream_reader)();
  // How many owners a jitbridge.Tensor's device buffer has (the tensor, its views, unconsumed capsules...).
  // -1 (TypeError) when `tensor` is not a jitbridge.Tensor.
  long (*tensor_buffer_refs)(PyObject* tensor);
  // Nanoseconds per view_array() of `obj` over `n` calls in a C++ loop, the consumer stream resolved once from
  // `stream` (None: the rule of consumer_stream()). Writes *ns_per_view; -1 with the error of the view (or a
  // TypeError when `obj` is no array), else 0.
  int (*bench_view)(PyObject* obj, long n, PyObject* stream, double* ns_per_view);
  // Forces a second architecture (one GPU cannot show two): binds `kernel` (a jitbridge._core._Kernel) on the
  // current device to the module its program's ModuleSet builds for `target` ("sm_90a", "compute_90"), as a device
  // of that architecture would get. `target` NULL: binds nothing. Returns a new reference to the tuple (target the
  // kernel now launches from on the current device, list of the targets built so far); NULL with the error set.
  PyObject* (*kernel_use_target)(PyObject* kernel, const char* target);
  // How many launches of `kernel` (a jitbridge._core._Kernel) took a launch shortcut (launch_shortcut.hpp), over
  // all its shortcuts and devices. -1 (TypeError) when `kernel` is not a kernel.
  long long (*kernel_shortcut_launches)(PyObject* kernel);
  // The benchmark floors of bench/bench_launch.py (kernel_call.cpp; kept out of _core's Python surface). `kernel` is
  // a RawKernel, `grid` and `block` an int or a tuple of up to 3 ints, `args` a tuple; the arguments are converted,
  // checked and packed once. Each returns a new reference, or NULL with the Python error set.
  // Microseconds (a float) for `batch` raw cuLaunchKernel calls in a C++ loop, parameters as pointers or as one
  // buffer (`buffer_form` nonzero).
  PyObject* (*raw_launch_batch)(PyObject* kernel, PyObject* grid, PyObject* block, PyObject* args, int batch,
                                int buffer_form);
  // A callable doing one raw cuLaunchKernel with the packed parameters (PreparedLaunch, kernels.hpp): called with no
  // arguments it relaunches them, with arguments of the prepared types it reads each exchange-API array's address.
  PyObject* (*prepared_launch)(PyObject* kernel, PyObject* grid, PyObject* block, PyObject* args);
  // {phase: microseconds per call}: each phase of the Python launch path alone in a C++ loop of `n` (launch_phases).
  PyObject* (*launch_phases)(PyObject* kernel, PyObject* grid, PyObject* block, PyObject* args, int n);
};

}  // namespace jitbridge::python
