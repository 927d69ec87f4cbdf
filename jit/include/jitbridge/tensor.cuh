// jitbridge/tensor.cuh — a strided array view that kernels take by value; jitbridge fills it from any array.
// Include it in kernel source as #include <jitbridge/tensor.cuh>: jitbridge provides it to NVRTC.
#pragma once

namespace jitbridge {

// data points at element 0; shape and strides (in elements, may be negative) describe the layout.
// The launcher checks T against the array's dtype (const T takes read-only arrays) and N against
// its number of dimensions.
template <class T, int N>
struct Tensor {
  T* data;
  long long shape[N];
  long long strides[N];

  // t(i, j, ...) with exactly N indices.
  template <class... I>
  __device__ __forceinline__ T& operator()(I... index) const {
    static_assert(sizeof...(I) == N, "a Tensor<T, N> takes exactly N indices");
    long long offset = 0;
    int d = 0;
    ((offset += static_cast<long long>(index) * strides[d++]), ...);
    return data[offset];
  }

  __device__ __forceinline__ long long size() const {
    long long n = 1;
    for (int d = 0; d < N; ++d) n *= shape[d];
    return n;
  }

  // The element at position `linear` of a C-order walk over the shape.
  __device__ __forceinline__ T& flat(long long linear) const {
    long long offset = 0;
    for (int d = N - 1; d >= 0; --d) {
      offset += (linear % shape[d]) * strides[d];
      linear /= shape[d];
    }
    return data[offset];
  }
};

}  // namespace jitbridge
