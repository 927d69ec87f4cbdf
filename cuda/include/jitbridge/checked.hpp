// jitbridge/checked.hpp — overflow-checked integer arithmetic for every size, stride, offset and extent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace jitbridge::checked {

// out = a + b, a - b, a * b, computed exactly (as if in infinite precision, whatever the operand types:
// an address plus a signed byte offset is fine) and stored in R. Return true when the exact result
// fits R; false on overflow, with `out` unspecified. The callers turn false into the error that names
// the quantity. Never throw.
template <class A, class B, class R>
[[nodiscard]] constexpr bool add(A a, B b, R& out) noexcept {
  static_assert(std::is_integral_v<A> && std::is_integral_v<B> && std::is_integral_v<R>);
  return !__builtin_add_overflow(a, b, &out);
}
template <class A, class B, class R>
[[nodiscard]] constexpr bool sub(A a, B b, R& out) noexcept {
  static_assert(std::is_integral_v<A> && std::is_integral_v<B> && std::is_integral_v<R>);
  return !__builtin_sub_overflow(a, b, &out);
}
template <class A, class B, class R>
[[nodiscard]] constexpr bool mul(A a, B b, R& out) noexcept {
  static_assert(std::is_integral_v<A> && std::is_integral_v<B> && std::is_integral_v<R>);
  return !__builtin_mul_overflow(a, b, &out);
}

// out = `v` rounded up to a multiple of `align` (0 counts as 1). False when that overflows.
[[nodiscard]] constexpr bool align_up(std::size_t v, std::size_t align, std::size_t& out) noexcept {
  if (align <= 1) {
    out = v;
    return true;
  }
  const std::size_t rem = v % align;
  if (rem == 0) {
    out = v;
    return true;
  }
  return add(v, align - rem, out);
}

// a + b, or the largest uint64 when that overflows (totals of sizes read from the file system).
[[nodiscard]] constexpr std::uint64_t add_saturated(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t out = 0;
  return add(a, b, out) ? out : std::numeric_limits<std::uint64_t>::max();
}

}  // namespace jitbridge::checked
