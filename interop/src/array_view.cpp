// array_view.cpp — building validated ArrayViews from DLTensors and __cuda_array_interface__ fields.
#include <fmt/format.h>

#include "jitbridge/array.hpp"

namespace jitbridge {
namespace {

[[noreturn]] void fail(InteropError::Kind kind, std::string_view arg, const std::string& what) {
  throw InteropError(kind, fmt::format("{}: {}", arg, what));
}

// Element count and byte extent must fit int64: a view whose addresses overflow is refused.
void check_extent(const ArrayView& v, std::string_view arg) {
  const std::int64_t item = static_cast<std::int64_t>(itemsize(v.dtype) ? itemsize(v.dtype) : 1);
  std::int64_t count = 1;
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] < 0) fail(InteropError::Kind::value, arg, fmt::format("shape[{}] is negative ({})", i, v.shape[i]));
    if (__builtin_mul_overflow(count, v.shape[i], &count))
      fail(InteropError::Kind::overflow, arg, "the element count overflows int64");
  }
  if (count == 0) return;
  std::int64_t span = 0;  // furthest element from the first, in elements
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    std::int64_t stride = v.strides[i], reach = 0;
    if (stride == INT64_MIN || __builtin_mul_overflow(v.shape[i] - 1, stride < 0 ? -stride : stride, &reach) ||
        __builtin_add_overflow(span, reach, &span))
      fail(InteropError::Kind::overflow, arg, "shape and strides reach beyond int64");
  }
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(span + 1, item, &bytes))
    fail(InteropError::Kind::overflow, arg, "shape and strides reach beyond int64 bytes");
}

}  // namespace

void Dims::assign(const std::int64_t* values, std::size_t n) {
  resize(n);
  for (std::size_t i = 0; i < n; ++i) data()[i] = values[i];
}

void Dims::resize(std::size_t n) {
  if (n > kInline) heap_.resize(n);
  else heap_.clear();
  size_ = n;
}

std::int64_t ArrayView::size() const {
  std::int64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) n *= shape[i];
  return n;
}

bool ArrayView::is_c_contiguous() const {
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

Dims contiguous_strides(const Dims& shape) {
  Dims s;
  s.resize(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = step;
    step *= shape[i] > 0 ? shape[i] : 1;
  }
  return s;
}

void fill_from_dltensor(const DLTensor& t, bool readonly, ArrayView& v, std::string_view arg) {
  if (t.ndim < 0) fail(InteropError::Kind::value, arg, fmt::format("ndim is negative ({})", t.ndim));
  if (t.ndim > 0 && !t.shape) fail(InteropError::Kind::value, arg, "shape is NULL");
  v.owner.reset();
  v.data = t.data;
  v.byte_offset = t.byte_offset;
  v.device = t.device;
  v.dtype = t.dtype;
  v.readonly = readonly;
  v.shape.assign(t.shape, static_cast<std::size_t>(t.ndim));
  if (t.strides) v.strides.assign(t.strides, static_cast<std::size_t>(t.ndim));
  else v.strides = contiguous_strides(v.shape);
  if (v.dtype.lanes == 0) fail(InteropError::Kind::value, arg, "dtype has 0 lanes");
  check_extent(v, arg);
  if (!v.data && v.size() != 0) fail(InteropError::Kind::value, arg, "data is NULL but the array is not empty");
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
  v.shape.assign(shape, ndim);
  if (strides_bytes) {
    const std::int64_t item = static_cast<std::int64_t>(itemsize(v.dtype));
    v.strides.resize(ndim);
    for (std::size_t i = 0; i < ndim; ++i) {
      if (strides_bytes[i] % item != 0)
        fail(InteropError::Kind::value, arg,
             fmt::format("strides[{}] = {} bytes is not a multiple of the item size {}", i, strides_bytes[i], item));
      v.strides[i] = strides_bytes[i] / item;
    }
  } else {
    v.strides = contiguous_strides(v.shape);
  }
  check_extent(v, arg);
  if (ptr == 0 && v.size() != 0) fail(InteropError::Kind::value, arg, "data pointer is 0 but the array is not empty");
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
    fail(InteropError::Kind::value, arg,
         fmt::format("strides has {} entries for {} dimensions", strides_bytes->size(), shape.size()));
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
