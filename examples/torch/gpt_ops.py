"""gpt_ops.py — the jitbridge ops of the GPT example (gpt.py): layer norm and causal softmax, each a
jitbridge.torch.custom_op with its backward kernels; the fused bias + GELU comes from ops.py.

- layer_norm(x, weight, bias): y = (x - mean) / sqrt(var + 1e-5) * weight + bias over the last dimension, as
  torch.nn.functional.layer_norm computes it. The backward recomputes each row's mean and variance from x (the row
  is read anyway) instead of saving them, and sums the weight and bias gradients deterministically: each block
  adds its rows' contributions per column in a fixed order into a scratch tensor, a second kernel adds the blocks.
- causal_softmax(scores, scale): softmax over the last dimension of scale * scores [..., T, T], where query t sees
  keys 0..t and the others get 0 — what eager attention does in three kernels (scale, mask, softmax) in one pass.
"""
import jitbridge
import jitbridge.torch as jt
from jitbridge.torch import Launch, Output, size

from ops import blocks, instances, per_dtype

COMMON = r'''
__device__ __forceinline__ float exp_(float v) { return expf(v); }
__device__ __forceinline__ double exp_(double v) { return exp(v); }
__device__ __forceinline__ float rsqrt_(float v) { return rsqrtf(v); }
__device__ __forceinline__ double rsqrt_(double v) { return rsqrt(v); }

struct Max { template <class T> __device__ T operator()(T a, T b) const { return a > b ? a : b; } };
struct Sum { template <class T> __device__ T operator()(T a, T b) const { return a + b; } };

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result, added in a
// fixed order (deterministic).
template <class T, class Op> __device__ T block_reduce(T v, Op op) {
  __shared__ T per_warp[32];
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();                        // per_warp may still be read by an earlier reduction
  if ((threadIdx.x & 31) == 0) per_warp[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = per_warp[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w) r = op(r, per_warp[w]);
  return r;
}
'''

LAYER_NORM_SOURCE = COMMON + r'''
constexpr int kMaxColumnsPerThread = 8;   // the backward keeps a thread's column sums in registers

// The mean and 1 / sqrt(variance + eps) of one row of C elements, computed by the whole block (two passes).
template <class T> __device__ void row_stats(const T* row, int C, T eps, T& mean, T& rstd) {
  T s = T(0);
  for (int c = threadIdx.x; c < C; c += blockDim.x) s += row[c];
  mean = block_reduce(s, Sum()) / T(C);
  T v = T(0);
  for (int c = threadIdx.x; c < C; c += blockDim.x) { const T d = row[c] - mean; v += d * d; }
  rstd = rsqrt_(block_reduce(v, Sum()) / T(C) + eps);
}

// One block per row.
template <class T>
__global__ void ln_fwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                       T* __restrict__ y, int C, T eps) {
  const long long base = (long long)blockIdx.x * C;
  T mean, rstd;
  row_stats(x + base, C, eps, mean, rstd);
  for (int c = threadIdx.x; c < C; c += blockDim.x) y[base + c] = (x[base + c] - mean) * rstd * w[c] + b[c];
}

// Rows [blockIdx.x * rows_per_block, +rows_per_block): grad_x per row, and this block's sums over its rows of
// grad_y * xhat (for grad_w) and grad_y (for grad_b) per column into partial[0][blockIdx.x][c] and
// partial[1][blockIdx.x][c]. C <= kMaxColumnsPerThread * blockDim.x.
template <class T>
__global__ void ln_bwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ gy,
                       T* __restrict__ gx, T* __restrict__ partial, int rows, int C, int rows_per_block, T eps) {
  T acc_w[kMaxColumnsPerThread], acc_b[kMaxColumnsPerThread];
#pragma unroll
  for (int j = 0; j < kMaxColumnsPerThread; ++j) acc_w[j] = acc_b[j] = T(0);
  const int r0 = blockIdx.x * rows_per_block;
  const int r1 = min(rows, r0 + rows_per_block);
  for (int r = r0; r < r1; ++r) {
    const long long base = (long long)r * C;
    T mean, rstd;
    row_stats(x + base, C, eps, mean, rstd);
    T a = T(0), bsum = T(0);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      const T gw = gy[base + c] * w[c];
      a += gw;
      bsum += gw * (x[base + c] - mean) * rstd;
    }
    a = block_reduce(a, Sum()) / T(C);
    bsum = block_reduce(bsum, Sum()) / T(C);
#pragma unroll
    for (int j = 0; j < kMaxColumnsPerThread; ++j) {
      const int c = threadIdx.x + j * blockDim.x;
      if (c < C) {
        const T xhat = (x[base + c] - mean) * rstd;
        const T g = gy[base + c];
        gx[base + c] = rstd * (g * w[c] - a - xhat * bsum);
        acc_w[j] += g * xhat;
        acc_b[j] += g;
      }
    }
  }
  T* pw = partial + (long long)blockIdx.x * C;
  T* pb = partial + ((long long)gridDim.x + blockIdx.x) * C;
#pragma unroll
  for (int j = 0; j < kMaxColumnsPerThread; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    if (c < C) { pw[c] = acc_w[j]; pb[c] = acc_b[j]; }
  }
}

// grad_w[c] = sum over blocks of partial[0][.][c] (blockIdx.y == 0), grad_b from partial[1] (blockIdx.y == 1).
// Block (32, 16): threadIdx.x picks the column, threadIdx.y every 16th row block; the 16 slice sums are added in
// order through shared memory.
template <class T>
__global__ void ln_grad_reduce(const T* __restrict__ partial, T* __restrict__ grad_w, T* __restrict__ grad_b,
                               int row_blocks, int C) {
  __shared__ T slice[16][33];
  const T* p = partial + (long long)blockIdx.y * row_blocks * C;
  T* out = blockIdx.y == 0 ? grad_w : grad_b;
  const int c = blockIdx.x * 32 + threadIdx.x;
  T acc = T(0);
  if (c < C)
    for (int rb = threadIdx.y; rb < row_blocks; rb += 16) acc += p[(long long)rb * C + c];
  slice[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    T total = T(0);
    for (int s = 0; s < 16; ++s) total += slice[s][threadIdx.x];
    out[c] = total;
  }
}
'''

CAUSAL_SOFTMAX_SOURCE = COMMON + r'''
// One block per row of x [..., T, T]; row r is query t = r % T, which sees keys 0..t.
template <class T>
__global__ void causal_softmax_fwd(const T* __restrict__ x, T* __restrict__ y, int C, T scale) {
  const long long base = (long long)blockIdx.x * C;
  const int n = (int)(blockIdx.x % C) + 1;
  T m = x[base] * scale;
  for (int c = threadIdx.x; c < n; c += blockDim.x) m = Max()(m, x[base + c] * scale);
  m = block_reduce(m, Max());
  T s = T(0);
  for (int c = threadIdx.x; c < n; c += blockDim.x) s += exp_(x[base + c] * scale - m);
  const T inv = T(1) / block_reduce(s, Sum());
  for (int c = threadIdx.x; c < C; c += blockDim.x) y[base + c] = c < n ? exp_(x[base + c] * scale - m) * inv : T(0);
}

// grad_x = scale * y * (grad_y - sum(grad_y * y)); masked entries (keys after the query) have y = 0, so their
// gradient is 0 and they are not read.
template <class T>
__global__ void causal_softmax_bwd(const T* __restrict__ y, const T* __restrict__ gy, T* __restrict__ gx, int C,
                                   T scale) {
  const long long base = (long long)blockIdx.x * C;
  const int n = (int)(blockIdx.x % C) + 1;
  T dot = T(0);
  for (int c = threadIdx.x; c < n; c += blockDim.x) dot += gy[base + c] * y[base + c];
  dot = block_reduce(dot, Sum());
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    gx[base + c] = c < n ? scale * y[base + c] * (gy[base + c] - dot) : T(0);
}
'''

EPS = 1e-5
LN_ROWS_PER_BLOCK = 16
MAX_COLUMNS_PER_THREAD = 8


def ln_threads(x):
    """Threads per layer-norm block: 128 for rows up to 512 columns, else 256 (a multiple of 32, never more
    than the row needs by much)."""
    return jt.where(x.shape[-1] <= 512, 128, 256)


def ln_rows(x):
    return x.numel() // jt.maximum(1, x.shape[-1])


def ln_row_blocks(x):
    return blocks(ln_rows(x), LN_ROWS_PER_BLOCK)


# ValueError unless weight and bias are [C] for x [..., C], with C <= 2048 (the backward keeps 8 columns per
# thread of 256); expressions, so that they run in C++ (jt.Check).
check_layer_norm = (
    jt.Check(lambda x, weight, bias: (x.dim() >= 1) & (weight.dim() == 1) & (bias.dim() == 1)
             & (weight.shape[0] == x.shape[-1]) & (bias.shape[0] == x.shape[-1]),
             "weight and bias must have shape [C] for x of shape [..., C]"),
    jt.Check(lambda x: (x.shape[-1] > 0) & (x.shape[-1] <= MAX_COLUMNS_PER_THREAD * 256),
             f"the last dimension must be 1 to {MAX_COLUMNS_PER_THREAD * 256}"),
)


ln_module = jitbridge.RawModule(code=LAYER_NORM_SOURCE, name_expressions=instances("ln_fwd", "ln_bwd", "ln_grad_reduce"))

LAYER_NORM = dict(
    inputs=("x", "weight", "bias"),
    outputs={"y": Output(like="x")},
    check=check_layer_norm,
    forward=Launch(per_dtype(ln_module, "ln_fwd"), args=("x", "weight", "bias", "y", size("x", -1), EPS),
                   grid=ln_rows, block=ln_threads),
    save=("x", "weight"),
    backward=(
        Launch(per_dtype(ln_module, "ln_bwd"),
               args=("x", "weight", "grad_y", "grad_x", "partial", ln_rows, size("x", -1), LN_ROWS_PER_BLOCK, EPS),
               grid=ln_row_blocks, block=ln_threads),
        Launch(per_dtype(ln_module, "ln_grad_reduce"),
               args=("partial", "grad_weight", "grad_bias", ln_row_blocks, size("x", -1)),
               grid=lambda x: (blocks(x.shape[-1], 32), 2), block=(32, 16)),
    ),
    grads={"x": Output(like="x"), "weight": Output(like="weight"), "bias": Output(like="weight")},
    scratch={"partial": Output(shape=lambda x: (2, ln_row_blocks(x), x.shape[-1]))},
)
layer_norm = jt.custom_op("jitbridge_gpt::layer_norm", **LAYER_NORM)


def softmax_threads(x):
    return jt.where(x.shape[-1] <= 256, 128, 256)


def ln_rows_of_y(y):
    return ln_rows(y)


check_causal_softmax = jt.Check(lambda x: (x.dim() >= 2) & (x.shape[-1] == x.shape[-2]),
                                "x must have shape [..., T, T] (queries by keys)")


softmax_module = jitbridge.RawModule(code=CAUSAL_SOFTMAX_SOURCE,
                                     name_expressions=instances("causal_softmax_fwd", "causal_softmax_bwd"))

CAUSAL_SOFTMAX = dict(
    inputs=("x", "scale: float"),
    outputs={"y": Output(like="x")},
    check=check_causal_softmax,
    forward=Launch(per_dtype(softmax_module, "causal_softmax_fwd"), args=("x", "y", size("x", -1), "scale"),
                   grid=ln_rows, block=softmax_threads),
    save=("y",),
    backward=Launch(per_dtype(softmax_module, "causal_softmax_bwd"),
                    args=("y", "grad_y", "grad_x", size("y", -1), "scale"),
                    grid=ln_rows_of_y, block=lambda y: softmax_threads(y)),
    grads={"x": Output(like="y")},
)
causal_softmax = jt.custom_op("jitbridge_gpt::causal_softmax", **CAUSAL_SOFTMAX)


def _self_check():
    import torch
    import torch.nn.functional as F

    x = torch.randn(3, 50, 200, device="cuda", dtype=torch.float64)
    w, b = torch.randn(200, device="cuda", dtype=torch.float64), torch.randn(200, device="cuda", dtype=torch.float64)
    torch.testing.assert_close(layer_norm(x, w, b), F.layer_norm(x, (200,), w, b, EPS))
    s = torch.randn(2, 3, 40, 40, device="cuda", dtype=torch.float64)
    mask = torch.ones(40, 40, dtype=torch.bool, device="cuda").triu(1)
    torch.testing.assert_close(causal_softmax(s, 0.5), torch.softmax((s * 0.5).masked_fill(mask, float("-inf")), -1))
    print("gpt_ops: ok")


if __name__ == "__main__":
    _self_check()
