// launch_shortcut.hpp — the launch path's shortcut for calls shaped like an earlier successful one:
// the same argument types, arrays of one framework (DLPack exchange API, CuPy or Numba) into
// pointer parameters, Python ints, floats, bools and None. Complex values, vector and struct
// pointees (their count and alignment rules) and immutable producers (JAX) take the full path. It reads only what each parameter
// needs (a pointer param: address, device, dtype), packs on the stack and launches. Anything
// unusual makes it decline, having done nothing, and the full path runs and words the error.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "interop/arrays.hpp"
#include "jitbridge/launcher.hpp"
#include "jitbridge/param_acceptors.hpp"
#include "launch/scalar_args.hpp"

namespace jitbridge::python {

struct KernelObject;

// One argument of a shortcut: what its Python type is, and how it becomes its parameter's bytes.
struct ShortcutArg {
  // integer: exactly int; index_integer: other integers (NumPy's), through __index__; floating: any
  // number into a float/double parameter (numpy.float32/float16 too), through __float__.
  // buffer: bytes or another buffer (structured scalars) of exactly the parameter's size, copied as
  // they are. numpy_scalar: a NumPy integer or float (numpy_scalar() knows its layout) into an integer or
  // floating parameter, read in place: no __index__ / __float__ call, no temporary object.
  enum class Kind : std::uint8_t {
    exchange_array, cupy_array, numba_array, null_pointer, integer, index_integer, boolean, floating, buffer,
    numpy_scalar
  };
  PyTypeObject* type = nullptr;  // borrowed: array types are held by the adapter cache, the rest are builtins
  Kind kind = Kind::integer;
  bool from_integer = false;     // floating: the argument is an integer (read as one, then converted)
  NumpyScalar numpy;             // numpy_scalar: how the value is laid out
  FastParam param;               // the parameter's rule and place (KernelPlan::fast): its acceptor writes it
};

// The shortcut for one pattern of argument types (a kernel keeps up to kMaxPerKernel). Made once, never changed
// afterwards except for the memo of the last configuration validated, so a launch may hold a
// pointer to it while Python code runs (a producer, a finalizer) and launches again.
struct LaunchShortcut {
  static constexpr std::size_t kMaxArgs = 32;
  static constexpr std::size_t kMaxBytes = kFastSpaceBytes;
  // Patterns a kernel learns (a kernel called with Python numbers, then NumPy scalars of a few widths, ...);
  // calls of further patterns take the full path.
  static constexpr std::size_t kMaxPerKernel = 8;
  std::vector<ShortcutArg> args;
  bool usable = false;           // false: calls of these types take the full path (learnt once)
  const DLPackExchangeAPI* api = nullptr;  // the exchange arrays' table (one framework per shortcut)
  std::size_t bytes = 0;         // the parameter buffer
  bool padded = true;            // the layout's padded: the buffer is zeroed before packing
  std::size_t array_index = 0;   // the first array argument (usable shortcuts have one)
  bool check_args = true;        // learnt from a launch with argument checks on (k.plan) or off
  // The last configuration validated, and where (validate_launch is skipped when both repeat).
  mutable LaunchConfig validated_config;
  mutable const Device* validated_device = nullptr;
  // The last configuration validated on each device (by ordinal), consulted only when the device
  // differs from validated_device: launches alternating between devices skip validate_launch too.
  struct Validated {
    const Device* device = nullptr;  // nullptr: none yet
    LaunchConfig config;
  };
  mutable std::vector<Validated> validated_on;
  // Launches this shortcut made (read by tests through _core._internals). GIL held.
  mutable std::uint64_t launches = 0;
};

// Launches `k` through a shortcut when the call fits one; returns false, having launched nothing,
// waited for nothing and left no Python error set, when none fits or a value needs the full path
// (a wrong dtype, arrays on two devices, a device where the kernel has not been resolved yet, an
// int out of range, a producer error). Every device is served: the kernel's function there is
// found in its per-device table (KernelObject::functions) when it is not the last launch's.
// Throws only what the full path would throw for the same call: an explicit `stream_obj` it
// cannot parse, a launch configuration over a limit (LaunchConfigError), a driver error at the
// launch. GIL held.
// Only shortcuts learnt with the same `check_args` are taken. `config.stream` is set to the consumer stream when
// it launches (a decline leaves `config` as it was).
bool launch_by_shortcut(const KernelObject& k, LaunchConfig& config, PyObject* const* args, std::size_t n,
                        PyObject* stream_obj, bool check_args);

// After a successful full-path launch of `k` with `args`: makes the shortcut for their types (or
// notes that such calls cannot take one), unless `k` has one for them or already has its maximum.
// `check_args`: how that launch was checked (the shortcut then serves only such launches).
void learn_shortcut(const KernelObject& k, PyObject* const* args, std::size_t n, bool check_args);

}  // namespace jitbridge::python
