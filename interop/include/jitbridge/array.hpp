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

// ---- dtypes ------------------------------------------------------------------------------
// NumPy-style name of a DLPack dtype: "float32", "bfloat16", "bool", "complex64",
// "float8_e4m3fn", "int8"; lanes > 1 print as "float32x4". Unknown codes: "dtype(code=..)".
std::string dtype_name(DLDataType dtype);
// The dtype for a NumPy-style name (also "half", "float", "double", "bf16"); nullopt if unknown.
std::optional<DLDataType> dtype_from_name(std::string_view name);
// Bytes per element (lanes included); 1 for bool; 0 for sub-byte types.
std::size_t itemsize(DLDataType dtype);
inline bool operator==(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
inline bool operator!=(DLDataType a, DLDataType b) { return !(a == b); }
// A __cuda_array_interface__ typestr ("<f4", "|b1", "<V2" read as bfloat16, "<c8").
// Throws InteropError(value) naming `arg` for big-endian, unknown or malformed strings.
DLDataType dtype_from_typestr(std::string_view typestr, std::string_view arg);
// The typestr jitbridge exports for a dtype ("<f4"); bfloat16 is "<V2" as torch writes it.
std::string typestr_of(DLDataType dtype);

std::string device_name(DLDevice device);  // "cuda:0", "cpu"
// Memory a CUDA kernel can address: device memory or managed memory.
inline bool is_cuda(DLDevice device) { return device.device_type == kDLCUDA || device.device_type == kDLCUDAManaged; }

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
  void assign(const std::int64_t* values, std::size_t n);
  void resize(std::size_t n);
  std::size_t size() const { return size_; }
  std::int64_t* data() { return heap_.empty() ? inline_ : heap_.data(); }
  const std::int64_t* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  std::int64_t& operator[](std::size_t i) { return data()[i]; }
  std::int64_t operator[](std::size_t i) const { return data()[i]; }
  std::vector<std::int64_t> to_vector() const { return {data(), data() + size_}; }

 private:
  static constexpr std::size_t kInline = 8;
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
  // Keeps the producer's memory alive as long as the view (and its copies) exist: a DLPack
  // managed tensor whose deleter runs exactly once when the last copy goes, a Python object
  // reference, or nothing for raw pointers without an owner. Deleters never throw.
  std::shared_ptr<void> owner;

  void* ptr() const { return static_cast<char*>(data) + byte_offset; }
  int ndim() const { return static_cast<int>(shape.size()); }
  std::int64_t size() const;      // number of elements
  bool is_c_contiguous() const;
};

// A view of `t` (validated: ndim >= 0, non-negative shape, element count and byte extent
// within int64, non-NULL data unless the array is empty; NULL strides mean C-contiguous).
// `arg` names the argument in error messages. Throws InteropError.
ArrayView view_from_dltensor(const DLTensor& t, bool readonly, std::shared_ptr<void> owner,
                             std::string_view arg);

// The same, filling `view` in place (no temporaries: the launch path views every argument this
// way). view.owner is reset; set it afterwards if the view must own something.
void fill_from_dltensor(const DLTensor& t, bool readonly, ArrayView& view, std::string_view arg);

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

// C-contiguous strides (in elements) for `shape`.
Dims contiguous_strides(const Dims& shape);

}  // namespace jitbridge
