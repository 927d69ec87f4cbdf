// internals.hpp — the C-level table jitbridge._core exposes as the capsule `_core._internals`, through which the
// test-only extension jitbridge_testing (python/testing/) reads state that only _core's own copy holds.
#pragma once

#include <Python.h>
#include <cuda.h>

#include <cstdint>

namespace jitbridge::python {

// Bumped whenever a member of JitbridgeInternals is added, removed or changes meaning. jitbridge_testing refuses a
// table whose version or size differs from the one it was built with (a build tree's jitbridge_testing beside a
// wheel built from another commit).
constexpr std::uint32_t kInternalsVersion = 6;
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
  // Forces a second architecture (one GPU cannot show two): binds `kernel` (a jitbridge._core._Kernel) on the
  // current device to the module its program's ModuleSet builds for `target` ("sm_90a", "compute_90"), as a device
  // of that architecture would get. `target` NULL: binds nothing. Returns a new reference to the tuple (target the
  // kernel now launches from on the current device, list of the targets built so far); NULL with the error set.
  PyObject* (*kernel_use_target)(PyObject* kernel, const char* target);
  // How many launches of `kernel` (a jitbridge._core._Kernel) took a launch shortcut (launch_shortcut.hpp), over
  // all its shortcuts and devices. -1 (TypeError) when `kernel` is not a kernel.
  long long (*kernel_shortcut_launches)(PyObject* kernel);
  // For the launch benchmarks' floors (jitbridge_testing, bench/bench_launch.py): resolves `kernel` (a
  // jitbridge._core._Kernel) on device `device` as a launch there does (loading its module on first use), makes the
  // device's primary context current and writes the kernel's CUfunction there and its CUkernel. 0, or -1 with the
  // Python error set (TypeError: no kernel; ValueError, NoDriverError, DriverError as a launch raises them).
  int (*kernel_function)(PyObject* kernel, int device, CUfunction* function, CUkernel* handle);
  // The launch shortcuts `kernel` (a jitbridge._core._Kernel) has learnt so far, oldest first: a new list of
  // (argument types, usable, how each argument is read) tuples, the last a tuple of launch_shortcut.hpp's
  // ShortcutArg::Kind names. NULL with the error set (TypeError when `kernel` is not a kernel).
  PyObject* (*kernel_shortcuts)(PyObject* kernel);
  // Packs the `nargs` Python objects at `args` for `kernel` (a jitbridge._core._Kernel) as a launch with its
  // check_args setting packs them, without launching (no GPU needed): a new list of bytes, one per parameter. `args`
  // must stay valid while Python code runs (a tuple's items). NULL with the error set (TypeError when `kernel` is
  // not a kernel; TypeError, ValueError, OverflowError... as a launch raises them for the arguments).
  PyObject* (*kernel_pack)(PyObject* kernel, PyObject* const* args, Py_ssize_t nargs);
};

}  // namespace jitbridge::python
