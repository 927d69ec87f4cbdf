"""noncontiguous_view.py — a kernel taking a transposed (non-contiguous) tensor through jitbridge/tensor.cuh."""
import torch

import jitbridge

k = jitbridge.RawKernel(r'''
#include <jitbridge/tensor.cuh>
extern "C" __global__ void add_rows(jitbridge::Tensor<const float, 2> in, jitbridge::Tensor<float, 1> out) {
  long long row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= in.shape[0]) return;
  float sum = 0.0f;
  for (long long j = 0; j < in.shape[1]; ++j) sum += in(row, j);
  out(row) = sum;
}''', "add_rows")

m = torch.randn(300, 500, device="cuda")
view = m.t()                      # 500 x 300, strides (1, 500): not contiguous
out = torch.full((500,), float("nan"), device="cuda")
k[(500 + 127) // 128, 128](view, out)
torch.testing.assert_close(out, view.sum(dim=1), rtol=1e-4, atol=1e-4)
print(f"noncontiguous_view ({k.signature}): ok")
