// array_view.cpp — building validated ArrayViews from DLTensors and __cuda_array_interface__ fields.
#include <fmt/format.h>

#include "jitbridge/array.hpp"
#include "jitbridge/checked.hpp"

namespace jitbridge {
namespace {

// Every refusal below goes through these cold, out-of-line functions (the message is built only there), so the
// checks stay small enough to inline into the readers: a valid view costs no call and no string.
[[noreturn, gnu::cold, gnu::noinline]] void fail(InteropError::Kind kind, std::string_view arg, const std::string& what) {
  if (arg.empty()) throw InteropError(kind, what);
  throw InteropError(kind, fmt::format("{}: {}", arg, what));
}
[[noreturn, gnu::cold, gnu::noinline]] void fail(InteropError::Kind kind, std::string_view arg, const char* what) {
  fail(kind, arg, std::string(what));
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_ndim(std::string_view arg, std::size_t ndim) {
  fail(InteropError::Kind::value, arg, fmt::format("ndim is {}; at most {} dimensions are supported", ndim, kMaxNdim));
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_negative_ndim(std::string_view arg, std::int32_t ndim) {
  fail(InteropError::Kind::value, arg, fmt::format("ndim is negative ({})", ndim));
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_negative_extent(std::string_view arg, std::size_t i, std::int64_t n) {
  fail(InteropError::Kind::value, arg, fmt::format("shape[{}] is negative ({})", i, n));
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_strides_count(std::string_view arg, std::size_t strides, std::size_t ndim) {
  fail(InteropError::Kind::value, arg, fmt::format("strides has {} entries for {} dimensions", strides, ndim));
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_first_wraps(std::string_view arg, const ArrayView& v) {
  fail(InteropError::Kind::overflow, arg,
       fmt::format("data + byte_offset ({:#x} + {}) wraps around the address space",
                   reinterpret_cast<std::uintptr_t>(v.data), v.byte_offset));
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_span_wraps(std::string_view arg, std::uintptr_t first) {
  fail(InteropError::Kind::overflow, arg,
       fmt::format("the bytes the array spans from {:#x} wrap around the address space", first));
}

constexpr const char* kNullData = "data is NULL but the array is not empty";
constexpr const char* kStridesOverflow = "the C-contiguous strides of the shape overflow int64";

// Rule 1.
inline void check_dtype(DLDataType d, std::string_view arg) {
  if (d.lanes == 0) fail(InteropError::Kind::value, arg, "dtype has 0 lanes");
  if (d.bits == 0) fail(InteropError::Kind::value, arg, "dtype has 0 bits");
}

// Rule 2's bound, checked before anything is allocated for the dimensions.
inline void check_ndim(std::size_t ndim, std::string_view arg) {
  if (ndim > kMaxNdim) fail_ndim(arg, ndim);
}

// The C-contiguous strides (in elements) of the `n` extents `shape` into `out` (extents of 0 and below count as 1);
// false when they overflow int64 (never for extents that pass rule 3). The one rule contiguous_strides and the
// readers use.
inline bool contiguous_into(const std::int64_t* shape, std::size_t n, std::int64_t* out) noexcept {
  std::int64_t step = 1;
  for (std::size_t i = n; i-- > 0;) {
    out[i] = step;
    if (i > 0 && shape[i] > 1 && !checked::mul(step, shape[i], step)) return false;
  }
  return true;
}

// Rules 2 (extents) and 3 for the `ndim` extents `shape` of a view of `dtype` (rule 1 holds). Returns the bytes the
// extents span laid out C-contiguous: item times the product of the non-zero extents, or 0 when some extent is 0
// (the view is empty; item >= 1, so a non-empty view spans at least 1 byte).
inline std::int64_t check_shape(const std::int64_t* shape, std::size_t ndim, DLDataType dtype, std::string_view arg) {
  std::int64_t bound = extent_item(dtype);
  bool empty = false;
  for (std::size_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0) fail_negative_extent(arg, i, shape[i]);
    if (shape[i] == 0) empty = true;
    else if (!checked::mul(bound, shape[i], bound))
      fail(InteropError::Kind::overflow, arg,
           "the array's size in bytes overflows int64 (itemsize times the non-zero extents: the array is too big)");
  }
  return empty ? 0 : bound;
}

// Rule 4 for a non-empty view (rules 1 to 3 hold): the bytes it can touch relative to element 0, [lo, end).
void check_span(const ArrayView& v, std::string_view arg, std::int64_t& lo_bytes, std::int64_t& end_bytes) {
  const std::int64_t item = extent_item(v.dtype);
  std::int64_t lo = 0, hi = 0;  // furthest elements below and above element 0, in elements
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    std::int64_t bytes = 0, reach = 0;
    if (!checked::mul(v.strides[i], item, bytes))
      fail(InteropError::Kind::overflow, arg,
           fmt::format("strides[{}] = {} elements of {} bytes overflows int64 bytes", i, v.strides[i], item));
    if (!checked::mul(v.shape[i] - 1, v.strides[i], reach) ||
        !(reach < 0 ? checked::add(lo, reach, lo) : checked::add(hi, reach, hi)))
      fail(InteropError::Kind::overflow, arg, "the offsets that shape and strides reach overflow int64");
  }
  std::int64_t extent = 0;
  if (!checked::sub(hi, lo, extent) || !checked::add(extent, 1, extent) || !checked::mul(extent, item, extent))
    fail(InteropError::Kind::overflow, arg, "the byte extent of shape and strides overflows int64");
  lo_bytes = lo * item;  // fits, and so does (hi + 1) * item: see extent
  end_bytes = (hi + 1) * item;
}

// Rules 4 and 5 (rules 1 to 3 hold; `bytes` is what check_shape returned for v.shape). `contiguous`: v.strides are
// contiguous_strides(v.shape), so rule 4 holds already: each stride times item, each reach (shape[i] - 1) *
// strides[i] and their sum are at most `bytes`, and the span is [0, bytes). `null_message` says what a NULL
// pointer is called.
inline void check_layout(const ArrayView& v, std::int64_t bytes, bool contiguous, std::string_view arg,
                         const char* null_message) {
  if (v.strides.size() != v.shape.size()) fail_strides_count(arg, v.strides.size(), v.shape.size());
  std::uintptr_t first = 0;
  if (!checked::add(reinterpret_cast<std::uintptr_t>(v.data), v.byte_offset, first)) fail_first_wraps(arg, v);
  if (bytes == 0) return;  // empty: no element is addressed, whatever the strides
  if (!v.data) fail(InteropError::Kind::value, arg, null_message);
  std::int64_t lo = 0, end = bytes;
  if (!contiguous) check_span(v, arg, lo, end);
  std::uintptr_t lowest = 0, last = 0;  // the first and last byte touched
  if (!checked::add(first, lo, lowest) || !checked::add(first, end - 1, last)) fail_span_wraps(arg, first);
}

// view.shape and view.strides from the producer's arrays, validated (rules 1 to 5). `strides` NULL
// means C-contiguous; `strides_bytes` says they are in bytes (CAI) rather than elements (DLPack).
[[gnu::always_inline]] inline void fill_layout(ArrayView& v, const std::int64_t* shape, std::size_t ndim, const std::int64_t* strides,
                 bool strides_bytes, std::string_view arg, const char* null_message) {
  check_dtype(v.dtype, arg);
  check_ndim(ndim, arg);
  v.shape.assign(shape, ndim);
  const std::int64_t bytes = check_shape(v.shape.data(), ndim, v.dtype, arg);
  if (!strides) {
    v.strides.resize(ndim);
    if (!contiguous_into(v.shape.data(), ndim, v.strides.data()))  // cannot fail after rule 3
      fail(InteropError::Kind::overflow, arg, kStridesOverflow);
  } else if (!strides_bytes) {
    v.strides.assign(strides, ndim);
  } else {
    const std::int64_t item = static_cast<std::int64_t>(itemsize(v.dtype));
    if (item == 0)
      fail(InteropError::Kind::value, arg,
           fmt::format("strides in bytes need a dtype of whole bytes, not {}", dtype_name(v.dtype)));
    v.strides.resize(ndim);
    for (std::size_t i = 0; i < ndim; ++i) {
      if (strides[i] % item != 0)
        fail(InteropError::Kind::value, arg,
             fmt::format("strides[{}] = {} bytes is not a multiple of the item size {}", i, strides[i], item));
      v.strides[i] = strides[i] / item;
    }
  }
  check_layout(v, bytes, !strides, arg, null_message);
}

}  // namespace

void validate_shape(const Dims& shape, DLDataType dtype, std::string_view arg) {
  check_dtype(dtype, arg);
  check_ndim(shape.size(), arg);
  check_shape(shape.data(), shape.size(), dtype, arg);
}

void validate_view(const ArrayView& v, std::string_view arg) {
  check_dtype(v.dtype, arg);
  check_ndim(v.shape.size(), arg);
  check_layout(v, check_shape(v.shape.data(), v.shape.size(), v.dtype, arg), false, arg, kNullData);
}

void Dims::resize_heap(std::size_t n) {
  if (n > kInline) heap_.resize(n);
  else heap_.clear();
  size_ = n;
}

std::int64_t ArrayView::size() const {
  std::int64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (!checked::mul(n, shape[i], n)) fail(InteropError::Kind::overflow, "", "the element count overflows int64");
  return n;
}

std::int64_t ArrayView::nbytes() const {
  std::int64_t n = 0;
  if (!checked::mul(size(), itemsize(dtype), n))
    fail(InteropError::Kind::overflow, "", "the size in bytes (nbytes) overflows int64");
  return n;
}

bool ArrayView::is_c_contiguous() const noexcept {
  if (strides.size() != shape.size()) return false;
  // Empty views are contiguous whatever their strides (checked first: a stride that mismatches
  // before the zero extent must not decide; fuzz finding py_dlpack/empty-view-cai-export-...).
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    if (!checked::mul(expected, shape[i], expected)) return false;
  }
  return true;
}

void contiguous_strides(const Dims& shape, Dims& out) {
  out.resize(shape.size());
  if (!contiguous_into(shape.data(), shape.size(), out.data()))
    fail(InteropError::Kind::overflow, "", kStridesOverflow);
}

Dims contiguous_strides(const Dims& shape) {
  Dims s;
  contiguous_strides(shape, s);
  return s;
}

void fill_from_dltensor(const DLTensor& t, bool readonly, ArrayView& v, std::string_view arg) {
  if (t.ndim < 0) fail_negative_ndim(arg, t.ndim);
  if (t.ndim > 0 && !t.shape) fail(InteropError::Kind::value, arg, "shape is NULL");
  v.owner.reset();
  v.data = t.data;
  v.byte_offset = t.byte_offset;
  v.device = t.device;
  v.dtype = t.dtype;
  v.readonly = readonly;
  fill_layout(v, t.shape, static_cast<std::size_t>(t.ndim), t.strides, false, arg, kNullData);
}

ArrayView view_from_dltensor(const DLTensor& t, bool readonly, std::shared_ptr<void> owner, std::string_view arg) {
  ArrayView v;
  fill_from_dltensor(t, readonly, v, arg);
  v.owner = std::move(owner);
  return v;
}

void fill_from_cai(std::uintptr_t ptr, bool readonly, const std::int64_t* shape, std::size_t ndim,
                   const std::int64_t* strides_bytes, DLDataType dtype, DLDevice device, ArrayView& v,
                   std::string_view arg) {
  v.owner.reset();
  v.dtype = dtype;
  v.data = reinterpret_cast<void*>(ptr);
  v.byte_offset = 0;
  v.device = device;
  v.readonly = readonly;
  fill_layout(v, shape, ndim, strides_bytes, true, arg, "data pointer is 0 but the array is not empty");
}

ArrayView view_from_cai(std::uintptr_t ptr, bool readonly, const std::int64_t* shape, std::size_t ndim,
                        const std::int64_t* strides_bytes, std::string_view typestr, DLDevice device,
                        std::shared_ptr<void> owner, std::string_view arg) {
  ArrayView v;
  fill_from_cai(ptr, readonly, shape, ndim, strides_bytes, dtype_from_typestr(typestr, arg), device, v, arg);
  v.owner = std::move(owner);
  return v;
}

ArrayView view_from_cai(std::uintptr_t ptr, bool readonly, const std::vector<std::int64_t>& shape,
                        const std::optional<std::vector<std::int64_t>>& strides_bytes, std::string_view typestr,
                        DLDevice device, std::shared_ptr<void> owner, std::string_view arg) {
  if (strides_bytes && strides_bytes->size() != shape.size())
    fail_strides_count(arg, strides_bytes->size(), shape.size());
  return view_from_cai(ptr, readonly, shape.data(), shape.size(), strides_bytes ? strides_bytes->data() : nullptr,
                       typestr, device, std::move(owner), arg);
}

namespace {

template <class Managed>
std::shared_ptr<void> adopt(Managed* t) {
  // shared_ptr's control block runs the deleter once; a throwing deleter would be a producer bug
  // that must not escape a destructor, so it is contained.
  return std::shared_ptr<void>(t, [](void* p) {
    auto* m = static_cast<Managed*>(p);
    if (m->deleter) {
      try {
        m->deleter(m);
      } catch (...) {
      }
    }
  });
}

}  // namespace

ArrayView view_from_managed(DLManagedTensorVersioned* tensor, std::string_view arg) {
  if (!tensor) fail(InteropError::Kind::buffer, arg, "the producer returned a NULL DLPack tensor");
  std::shared_ptr<void> owner = adopt(tensor);  // from here on the deleter runs exactly once
  if (tensor->version.major != DLPACK_MAJOR_VERSION)
    fail(InteropError::Kind::buffer, arg,
         fmt::format("DLPack version {}.{} is not supported (major version {} expected)", tensor->version.major,
                     tensor->version.minor, DLPACK_MAJOR_VERSION));
  const bool readonly = (tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  return view_from_dltensor(tensor->dl_tensor, readonly, std::move(owner), arg);
}

ArrayView view_from_managed(DLManagedTensor* tensor, std::string_view arg) {
  if (!tensor) fail(InteropError::Kind::buffer, arg, "the producer returned a NULL DLPack tensor");
  std::shared_ptr<void> owner = adopt(tensor);
  return view_from_dltensor(tensor->dl_tensor, false, std::move(owner), arg);
}

}  // namespace jitbridge
