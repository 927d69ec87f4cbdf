// jitbridge/array.hpp — one view of an array from any protocol: pointer, device, dtype, shape,
// strides (in elements), read-only flag, and the handle that keeps the producer's memory alive.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "jitbridge/checked.hpp"
#include "jitbridge/dtype.hpp"  // dtypes and devices: names, sizes, typestrs (dtype.cpp)

namespace jitbridge {

// Bad array input. kind() says which Python exception it becomes.
class InteropError : public std::runtime_error {
 public:
  enum class Kind { type, value, buffer, overflow };
  InteropError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

// ---- dims --------------------------------------------------------------------------------
// shape/strides storage: inline up to 8 dimensions, so views of ordinary arrays never allocate.
class Dims {
 public:
  Dims() = default;
  Dims(const std::int64_t* values, std::size_t n) { assign(values, n); }
  Dims(const Dims& o) { assign(o.data(), o.size()); }
  Dims& operator=(const Dims& o) {
    if (this != &o) assign(o.data(), o.size());
    return *this;
  }
  // Inline for up to kInline dimensions (no call, no allocation: the launch path fills views per argument).
  void assign(const std::int64_t* values, std::size_t n) {
    resize(n);
    std::int64_t* d = data();
    for (std::size_t i = 0; i < n; ++i) d[i] = values[i];
  }
  void resize(std::size_t n) {
    if (n <= kInline && heap_.empty()) size_ = n;
    else resize_heap(n);
  }
  std::size_t size() const { return size_; }
  std::int64_t* data() { return heap_.empty() ? inline_ : heap_.data(); }
  const std::int64_t* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  std::int64_t& operator[](std::size_t i) { return data()[i]; }
  std::int64_t operator[](std::size_t i) const { return data()[i]; }
  std::vector<std::int64_t> to_vector() const { return {data(), data() + size_}; }

 private:
  static constexpr std::size_t kInline = 8;
  void resize_heap(std::size_t n);  // resize() past kInline, or back from the heap
  std::int64_t inline_[kInline] = {};
  std::vector<std::int64_t> heap_;
  std::size_t size_ = 0;
};

// ---- the view ----------------------------------------------------------------------------
struct ArrayView {
  void* data = nullptr;           // the producer's base pointer; element 0 is at data + byte_offset
  std::uint64_t byte_offset = 0;
  DLDevice device{kDLCPU, 0};
  DLDataType dtype{kDLFloat, 32, 1};
  Dims shape;
  Dims strides;                   // in elements, always filled (C-contiguous when the producer gave none)
  bool readonly = false;
  // The producer's name (JAX) when its arrays are immutable although it exports them writable:
  // kernels take them only through const pointees (pack_argument). nullptr otherwise.
  const char* immutable_producer = nullptr;
  // Keeps the producer's memory alive as long as the view (and its copies) exist: a DLPack
  // managed tensor whose deleter runs exactly once when the last copy goes, a Python object
  // reference, or nothing for raw pointers without an owner. Deleters never throw.
  std::shared_ptr<void> owner;

  // The address of element 0, data + byte_offset, computed on integers (a NULL data pointer with an
  // offset is no undefined behaviour). Valid views never wrap (see validate_view).
  void* ptr() const noexcept {
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(data) + static_cast<std::uintptr_t>(byte_offset));
  }
  int ndim() const { return static_cast<int>(shape.size()); }
  // Number of elements. Fits int64 for every valid view; throws InteropError(overflow) otherwise.
  std::int64_t size() const;
  // size() * itemsize(dtype), as NumPy's nbytes (0 for sub-byte dtypes; a broadcast view counts every
  // element). Fits int64 for every valid view; throws InteropError(overflow) otherwise.
  std::int64_t nbytes() const;
  // False also for views whose strides overflow (never valid ones). Empty views are contiguous.
  bool is_c_contiguous() const noexcept;
};

// ---- what a valid view is ----------------------------------------------------------------
// The most dimensions a view may have (NumPy's limit): larger ndims are refused before anything
// is allocated for them.
inline constexpr std::size_t kMaxNdim = 64;

// validate_view() is the one place that decides whether a view is valid; every view_from_* and
// fill_from_* (and DeviceTensor::empty) ends in it, and nothing that measures a valid view
// (size(), nbytes(), contiguous_strides, byte strides = strides[i] * itemsize, the byte extent)
// can overflow. With item = ceil(dtype.bits * dtype.lanes / 8) (itemsize(), or 1 byte per
// element for sub-byte dtypes), a view is valid when
//  1. dtype: bits >= 1 and lanes >= 1;
//  2. ndim <= kMaxNdim, strides.size() == shape.size(), and every shape[i] >= 0;
//  3. size: item * (product of the non-zero shape[i]) fits int64 (NumPy's "array is too big" rule:
//     the element count, nbytes, and the C-contiguous strides in elements and in bytes all fit,
//     broadcast stride-0 views included);
//  4. layout: for an empty view (some shape[i] == 0) any strides are valid: no element is ever
//     addressed. Otherwise every strides[i] * item fits int64, and with
//       lo = sum of (shape[i] - 1) * strides[i] over the negative strides,
//       hi = sum of (shape[i] - 1) * strides[i] over the positive strides (both in elements),
//     the bytes the view can touch, relative to element 0, are [lo * item, (hi + 1) * item):
//     lo, hi and the byte extent (hi - lo + 1) * item fit int64 (and so lo * item and
//     (hi + 1) * item do);
//  5. address: element 0 is at data + byte_offset, which must not wrap around uintptr_t (checked for
//     empty views too: ptr() is computed for them). For a non-empty view data is not NULL and the
//     first and last bytes touched, ptr() + lo * item and ptr() + (hi + 1) * item - 1, lie within
//     the address space (computing them does not wrap uintptr_t).
// Throws InteropError naming `arg` (a message "arg: what"; no prefix when `arg` is empty): value for
// rules 1, 2 and a NULL pointer, overflow for every quantity that does not fit, naming it.
void validate_view(const ArrayView& view, std::string_view arg);
// Rules 1 to 3 alone, for an array about to be allocated C-contiguous (DeviceTensor::empty): after
// it, contiguous_strides(shape) and the element count times itemsize(dtype) cannot overflow.
// Throws as validate_view.
void validate_shape(const Dims& shape, DLDataType dtype, std::string_view arg);

// A view of `t`, validated (validate_view; also ndim >= 0 and non-NULL shape): NULL strides mean
// C-contiguous.
// `arg` names the argument in error messages. Throws InteropError.
ArrayView view_from_dltensor(const DLTensor& t, bool readonly, std::shared_ptr<void> owner,
                             std::string_view arg);

// The same, filling `view` in place (no temporaries: the launch path views every argument this
// way). view.owner is reset; set it afterwards if the view must own something.
void fill_from_dltensor(const DLTensor& t, bool readonly, ArrayView& view, std::string_view arg);

// Whether fill_from_dltensor accepts `t` as C-contiguous (strides NULL): true exactly when it would fill a view
// without throwing and with strides NULL, so a caller that reads only a view's address, device, dtype and
// readonly (the C interface's launch) may skip filling shape and strides. Inline (the launch path calls it per
// array). Never throws.
// plain_fields is the same test over a tensor's fields (the C interface's jitbridge_array has them, no DLTensor).
[[gnu::always_inline]] inline bool plain_fields(const void* data, std::uint64_t byte_offset, DLDataType dtype,
                                                std::int32_t ndim, const std::int64_t* shape,
                                                const std::int64_t* strides) noexcept {
  // fill_from_dltensor's checks and rules 1 to 5 with strides NULL (check_layout's contiguous case), as one test.
  // (extent_item is 0 exactly when bits or lanes is: bits * lanes <= 255 * 65535, so nothing wraps.)
  std::int64_t bytes = extent_item(dtype);
  if (strides || ndim < 0 || static_cast<std::size_t>(ndim) > kMaxNdim || (ndim > 0 && !shape) || bytes == 0)
    return false;
  bool empty = false;
  for (std::int32_t i = 0; i < ndim; ++i) {
    const std::int64_t n = shape[i];
    if (n < 0) return false;
    if (n == 0) empty = true;
    else if (!checked::mul(bytes, n, bytes)) return false;
  }
  std::uintptr_t first = 0, last = 0;
  if (!checked::add(reinterpret_cast<std::uintptr_t>(data), byte_offset, first)) return false;
  return empty || (data && checked::add(first, bytes - 1, last));
}
inline bool plain_dltensor(const DLTensor& t) noexcept {
  return plain_fields(t.data, t.byte_offset, t.dtype, t.ndim, t.shape, t.strides);
}

// A view from __cuda_array_interface__ fields already taken out of the dict. `strides_bytes`
// empty means C-contiguous. Throws InteropError naming `arg`.
ArrayView view_from_cai(std::uintptr_t ptr, bool readonly, const std::vector<std::int64_t>& shape,
                        const std::optional<std::vector<std::int64_t>>& strides_bytes,
                        std::string_view typestr, DLDevice device, std::shared_ptr<void> owner,
                        std::string_view arg);
// The same over raw arrays (no allocation for up to 8 dimensions): `shape` has `ndim` entries;
// `strides_bytes` is NULL for C-contiguous data, else `ndim` byte strides.
ArrayView view_from_cai(std::uintptr_t ptr, bool readonly, const std::int64_t* shape, std::size_t ndim,
                        const std::int64_t* strides_bytes, std::string_view typestr, DLDevice device,
                        std::shared_ptr<void> owner, std::string_view arg);

// The same, filling `view` in place with an already parsed dtype (the per-framework fast readers'
// path). view.owner is reset. Throws InteropError naming `arg`.
void fill_from_cai(std::uintptr_t ptr, bool readonly, const std::int64_t* shape, std::size_t ndim,
                   const std::int64_t* strides_bytes, DLDataType dtype, DLDevice device, ArrayView& view,
                   std::string_view arg);

// Views that take ownership of a DLPack managed tensor: its deleter runs exactly once, when the
// last copy of the view lets go (or at once, before the throw, if the tensor is refused).
// A versioned tensor whose major version is not 1 is refused with InteropError(buffer);
// DLPACK_FLAG_BITMASK_READ_ONLY makes the view read-only.
ArrayView view_from_managed(DLManagedTensorVersioned* tensor, std::string_view arg);
ArrayView view_from_managed(DLManagedTensor* tensor, std::string_view arg);

// C-contiguous strides (in elements) for `shape` (extents of 0 and below count as 1, as NumPy
// does). Throws InteropError(overflow) when they do not fit int64 (never for a valid view's shape).
Dims contiguous_strides(const Dims& shape);
// The same into `out` (resized; `out` must not be `shape`).
void contiguous_strides(const Dims& shape, Dims& out);

}  // namespace jitbridge
