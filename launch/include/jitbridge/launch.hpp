// jitbridge/launch.hpp — the typed C++ launch: launch(function, device, config, args...) checks every
// argument against the kernel's signature exactly as the Python API does, then launches.
#pragma once

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

template <class T>
void fill(Slot& s, const T& arg, int device) {
  if constexpr (std::is_same_v<T, ArrayView>) {
    s.value.kind = ArgValue::Kind::array;
    s.value.array = &arg;
  } else if constexpr (std::is_same_v<T, std::nullptr_t>) {
    s.value.kind = ArgValue::Kind::null_pointer;
  } else if constexpr (std::is_pointer_v<T>) {
    // A raw device pointer: typed by its pointee, on the launch device, const if the pointee is.
    using P = std::remove_pointer_t<T>;
    s.view.data = const_cast<void*>(static_cast<const void*>(arg));
    s.view.device = {kDLCUDA, device};
    s.view.dtype = std::is_void_v<P> ? DLDataType{kDLOpaqueHandle, 8, 1} : dtype_of<P>();
    s.view.readonly = std::is_const_v<P>;
    s.value.kind = ArgValue::Kind::array;
    s.value.array = &s.view;
  } else if constexpr (std::is_same_v<T, bool>) {
    s.value.kind = ArgValue::Kind::boolean;
    s.value.i = arg;
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    s.value.kind = ArgValue::Kind::signed_integer;
    s.value.i = arg;
  } else if constexpr (std::is_integral_v<T>) {
    s.value.kind = ArgValue::Kind::unsigned_integer;
    s.value.u = arg;
  } else if constexpr (std::is_floating_point_v<T>) {
    s.value.kind = ArgValue::Kind::floating;
    s.value.f = static_cast<double>(arg);
  } else {
    static_assert(std::is_trivially_copyable_v<T>, "struct arguments must be trivially copyable");
    s.value.kind = ArgValue::Kind::bytes;
    s.value.data = &arg;
    s.value.size = sizeof(T);
  }
  s.value.python_type = "C++ value";
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
  launch_detail::Slot slots[sizeof...(Args) > 0 ? sizeof...(Args) : 1];
  std::size_t i = 0;
  (launch_detail::fill(slots[i++], args, device.ordinal()), ...);
  thread_local ArgBuffer buffer;
  launch_detail::pack_all(function, slots, sizeof...(Args), device.ordinal(), buffer);
  validate_launch_memo(function, config, device);
  launch(function, config, device, buffer);
}

}  // namespace jitbridge
