// kernels.hpp — the Python-side kernel objects: what a RawKernel holds, and the launch entry point.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "jitbridge/kernel_plan.hpp"
#include "jitbridge/launcher.hpp"
#include "jitbridge/module_set.hpp"
#include "launch/launch_shortcut.hpp"
#include "launch/scalar_args.hpp"

namespace jitbridge::python {

// A loaded module as Python holds it (jitbridge.RawModule's core): the Program (if any) and its
// ModuleSet, which loads (and builds for other device architectures) at first use, so
// construction needs no GPU.
struct ModuleObject {
  ProgramHandle program;                    // empty for modules loaded from files
  std::string image;                        // file contents, for modules loaded from files (pickling)
  std::shared_ptr<ModuleSet> modules;
  // The module serving `device` (loads, or compiles for its architecture, on first use); throws
  // std::invalid_argument (ValueError) when an explicit arch cannot run there, NoDriverError, DriverError.
  const Module& loaded(const Device& device) const;
  const Module& loaded() const;             // on the current device
};

// One kernel (jitbridge.RawKernel's core). Construction needs no GPU; the module loads at the
// first launch on each device. Calls are checked against the signature when the program has one.
struct KernelObject {
  std::shared_ptr<ModuleObject> module;
  std::string name;
  // The launch plan (launch/kernel_plan.hpp): signature, packing plans, the Function per device. Shared with the C
  // interface's handles of this kernel (kernel_from_python).
  std::shared_ptr<const KernelPlan> launch;
  bool check_args = true;                   // calls without check_args= check arguments (RawKernel(check_args=))
  mutable const Device* checked_device = nullptr;  // the device `function` serves (the last launch's)
  mutable const Function* function = nullptr;      // launch's Function on checked_device (the plan keeps it)
  // The kernel in the module serving `device`; also makes it `function`/`checked_device`. Raises
  // ValueError naming the kernel when the program's explicit arch cannot run there. GIL held.
  const Function& resolved(const Device& device) const;
  const Function& resolved() const;         // on the current device
  // "saxpy: argument 2", for error messages; made once per index (a deque keeps them in place).
  // Like `function`, only touched with the GIL held.
  const char* argument_name(std::size_t i) const;
  mutable std::deque<std::string> argument_names;
  // The launch shortcuts learnt so far (at most LaunchShortcut::kMaxPerKernel; never removed, so a launch may hold one while
  // Python code runs). GIL held.
  mutable std::vector<std::unique_ptr<LaunchShortcut>> shortcuts;
  // The grid and block objects of the last k(grid, block, args) call and what they parsed to: kept
  // only for ints and tuples of ints, which cannot change (a reference is held). GIL held.
  struct DimMemo {
    py::object obj;
    Dim3 value;
  };
  mutable DimMemo last_grid, last_block;
};

// A kernel with its launch configuration bound: k[grid, block] / k[grid, block, stream, shared_mem].
struct ConfiguredKernel {
  py::object kernel;                        // the RawKernel (keeps KernelObject alive)
  KernelObject* core = nullptr;
  LaunchConfig config;
  py::object stream;                        // None, or what the user gave
};

// Launches `k` with `args` (Python objects). `stream_obj` is the explicit stream= (None: the
// consumer-stream rule). Returns nothing; raises Python exceptions (TypeError, OverflowError,
// ValueError, BufferError, LaunchError, NoDriverError) with the Python error set. GIL held.
// `args` must stay valid while Python code runs (converting an argument does): a tuple's items or
// a vectorcall's argument array, never a list's item array (a property could resize the list).
// `check_args` false: packed with k.launch->plan(false) (any dtype, count, alignment; read-only arrays
// too), device memory and the one-device rule still checked. `config.stream` is the caller's scratch: the launch
// sets it to the consumer stream. Inline: a call the shortcut takes costs no call of its own here.
void launch_full_path(const KernelObject& k, LaunchConfig& config, PyObject* const* args, std::size_t n,
                      PyObject* stream_obj, bool check_args);  // kernel_call.cpp
inline void launch_from_python(const KernelObject& k, LaunchConfig& config, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* stream_obj, bool check_args = true) {
  const std::size_t n = static_cast<std::size_t>(nargs);
  if (!k.shortcuts.empty() && launch_by_shortcut(k, config, args, n, stream_obj, check_args)) return;
  launch_full_path(k, config, args, n, stream_obj, check_args);
}
// Packs `args` against `k`'s signature without launching (no GPU needed); returns the bytes of
// each parameter. `args` as for launch_from_python. For the test-only jitbridge_testing.pack_args (_core._internals).
py::list pack_from_python(const KernelObject& k, PyObject* const* args, Py_ssize_t nargs);

// grid=/block=/cluster= values: an int or a tuple (or list) of up to 3 ints, each from 1 to
// 2**32-1 (NumPy integers and other __index__ objects too). Throws TypeError (not an int; an
// __index__ raising TypeError), ValueError (out of range, also beyond int64; a wrong number of
// dimensions) naming `what` and the axis; another exception from an __index__ propagates.
Dim3 parse_dim3(py::handle value, const char* what);
// The same, answered from `memo` when `value` is the object parsed last (and remembered there
// when it is an int or a tuple of ints: parse_dim3_remembered). Inline: a repeat is one compare.
Dim3 parse_dim3_remembered(PyObject* value, const char* what, KernelObject::DimMemo& memo);  // kernel_call.cpp
inline Dim3 parse_dim3(PyObject* value, const char* what, KernelObject::DimMemo& memo) {
  return value == memo.obj.ptr() ? memo.value : parse_dim3_remembered(value, what, memo);
}

void bind_kernels(py::module_& m);  // kernels.cpp

}  // namespace jitbridge::python
