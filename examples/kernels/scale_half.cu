// scale_half.cu — half-precision output, a typedef, a macro and a struct passed by value.
#include <cuda_fp16.h>

typedef float real;
#define RESTRICT __restrict__

struct Params {
  double scale;
  float offset;
};

extern "C" __global__ void __launch_bounds__(256)
scale_half(const real* RESTRICT in, __half* out, int n, Params p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half(in[i] * static_cast<float>(p.scale) + p.offset);
}
