// jitbridge/launch.hpp — the typed C++ launch: launch(function, device, config, args...) checks every
// argument against the kernel's signature exactly as the Python API does, then launches.
#pragma once

#include <cstring>
#include <type_traits>

#include "jitbridge/launcher.hpp"
#include "jitbridge/pack_values.hpp"

namespace jitbridge {
namespace launch_detail {

template <class T>
DLDataType dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return {kDLBool, 8, 1};
  else if constexpr (std::is_floating_point_v<U>) return {kDLFloat, static_cast<std::uint8_t>(8 * sizeof(U)), 1};
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) return {kDLInt, static_cast<std::uint8_t>(8 * sizeof(U)), 1};
  else if constexpr (std::is_integral_v<U>) return {kDLUInt, static_cast<std::uint8_t>(8 * sizeof(U)), 1};
  else return {kDLOpaqueHandle, static_cast<std::uint8_t>(8 * sizeof(U)), 1};  // matches only void* parameters
}

// Storage for one argument's ArgValue (and the ArrayView a raw device pointer becomes).
struct Slot {
  ArgValue value;
  ArrayView view;
};

// The dtype a raw `P*` argument's view has: P's, or any bytes for void.
template <class P>
DLDataType pointer_dtype() {
  if constexpr (std::is_void_v<P>) return {kDLOpaqueHandle, 8, 1};
  else return dtype_of<P>();
}

// The value of an argument that is neither an array nor a pointer (nullptr is the NULL pointer).
template <class T>
void fill_value(ArgValue& v, const T& arg) {
  if constexpr (std::is_same_v<T, std::nullptr_t>) {
    v.kind = ArgValue::Kind::null_pointer;
  } else if constexpr (std::is_same_v<T, bool>) {
    v.kind = ArgValue::Kind::boolean;
    v.i = arg;
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    v.kind = ArgValue::Kind::signed_integer;
    v.i = arg;
  } else if constexpr (std::is_integral_v<T>) {
    v.kind = ArgValue::Kind::unsigned_integer;
    v.u = arg;
  } else if constexpr (std::is_floating_point_v<T>) {
    v.kind = ArgValue::Kind::floating;
    v.f = static_cast<double>(arg);
  } else {
    static_assert(std::is_trivially_copyable_v<T>, "struct arguments must be trivially copyable");
    v.kind = ArgValue::Kind::bytes;
    v.data = &arg;
    v.size = sizeof(T);
  }
  v.python_type = "C++ value";
}

template <class T>
void fill(Slot& s, const T& arg, int device) {
  if constexpr (std::is_same_v<T, ArrayView>) {
    s.value.kind = ArgValue::Kind::array;
    s.value.array = &arg;
    s.value.python_type = "C++ value";
  } else if constexpr (std::is_pointer_v<T>) {
    // A raw device pointer: typed by its pointee, on the launch device, const if the pointee is.
    using P = std::remove_pointer_t<T>;
    s.view.data = const_cast<void*>(static_cast<const void*>(arg));
    s.view.device = {kDLCUDA, device};
    s.view.dtype = pointer_dtype<P>();
    s.view.readonly = std::is_const_v<P>;
    s.value.kind = ArgValue::Kind::array;
    s.value.array = &s.view;
    s.value.python_type = "C++ value";
  } else {
    fill_value(s.value, arg);
  }
}

// The fast path's take on one argument for parameter `p` (accept_value of the value fill() makes, without a Slot):
// true when accepted and written into `space`; `used` as accept_pointer's device. Never throws.
template <class T>
bool accept_fast(const FastParam& p, const T& arg, int device, int& used, unsigned char* space) noexcept {
  if constexpr (std::is_same_v<T, ArrayView>) {
    return accept_array(p, arg.ptr(), arg.device, arg.dtype, arg.readonly || arg.immutable_producer, used, space);
  } else if constexpr (std::is_pointer_v<T>) {
    using P = std::remove_pointer_t<T>;
    return accept_array(p, const_cast<void*>(static_cast<const void*>(arg)), DLDevice{kDLCUDA, device},
                        pointer_dtype<P>(), std::is_const_v<P>, used, space);
  } else {
    ArgValue v;
    fill_value(v, arg);
    return accept_value(p, v, used, space);
  }
}

// Packs and checks (with check_args false: function.plan(false), as check_args=False); shared by launch(), the C
// interface (c_api.cpp) and tests. Throws ArgumentError.
void pack_all(const Function& function, const Slot* slots, std::size_t n, int device, ArgBuffer& out,
              bool check_args = true);

}  // namespace launch_detail

// Checks `args` against `function`'s signature (as the Python API does), the configuration
// against `device`, then launches on config.stream. Raw T* arguments are device pointers on
// `device`, typed by T (void* parameters take any). Throws ArgumentError, LaunchConfigError,
// LaunchError.
template <class... Args>
void launch(const Function& function, const Device& device, const LaunchConfig& config, const Args&... args) {
  constexpr std::size_t n = sizeof...(Args);
  if constexpr (n <= kMaxParamPointers) {
    // The signature's fast params first (as the C interface: accept_value's rules); any decline: the full path
    // decides and words the error. The driver gets the same bytes, as kernelParams, either way.
    const ParamLayout* layout = function.param_layout();
    const std::vector<FastParam>& fast = function.fast();
    if (layout && fast.size() == n && layout->bytes <= kFastSpaceBytes) {
      alignas(16) unsigned char space[kFastSpaceBytes];
      if (layout->padded) std::memset(space, 0, layout->bytes);  // padding passes as zeros (parameters are written whole)
      const int ordinal = device.ordinal();
      int used = -1;
      [[maybe_unused]] std::size_t i = 0;
      if ((launch_detail::accept_fast(fast[i++], args, ordinal, used, space) && ...) && (used < 0 || used == ordinal)) {
        validate_launch_memo(function, config, device);
        launch(function, config, device, ParamBytes{space, layout->bytes, layout->offsets.data(), n});
        return;
      }
    }
  }
  launch_detail::Slot slots[n > 0 ? n : 1];
  std::size_t i = 0;
  (launch_detail::fill(slots[i++], args, device.ordinal()), ...);
  thread_local ArgBuffer buffer;
  launch_detail::pack_all(function, slots, n, device.ordinal(), buffer);
  validate_launch_memo(function, config, device);
  launch(function, config, device, buffer);
}

}  // namespace jitbridge
