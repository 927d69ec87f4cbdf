"""gpt_ops.py — the jitbridge ops of the GPT example (gpt.py): layer norm (alone, and fused with the residual add
before it) and causal softmax, each a jitbridge.torch.custom_op with its backward kernels; the fused bias + GELU
comes from ops.py.

- layer_norm(x, weight, bias): y = (x - mean) / sqrt(var + 1e-5) * weight + bias over the last dimension, as
  torch.nn.functional.layer_norm computes it. The backward recomputes each row's mean and variance from x (the row
  is read anyway) instead of saving them, and sums the weight and bias gradients deterministically: each block
  adds its rows' contributions per column in a fixed order into a scratch tensor, a second kernel adds the blocks.
- add_layer_norm(x, h, h_bias, weight, bias) -> (s, y): the residual add s = x + (h + h_bias), h being a linear
  layer's product without its bias, and y = layer_norm(s, weight, bias), in one kernel; its backward adds the
  gradient s has from later layers to the one through the norm, writes it for x and h and sums it over the rows for
  h_bias, beside the weight and bias gradients (one scratch tensor, three sums). What torch.compile fuses for the
  eager model (the linear's bias, the residual add and the next layer norm), done by hand.
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

// One block per row: s = x + (h + h_bias), the residual add with the bias of the linear layer that made h, and
// y = layer_norm(s). Each thread reads back only the elements of s it wrote itself, so no barrier is needed.
template <class T>
__global__ void add_ln_fwd(const T* __restrict__ x, const T* __restrict__ h, const T* __restrict__ h_bias,
                           const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ s, T* __restrict__ y,
                           int C, T eps) {
  const long long base = (long long)blockIdx.x * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) s[base + c] = x[base + c] + (h[base + c] + h_bias[c]);
  T mean, rstd;
  row_stats(s + base, C, eps, mean, rstd);
  for (int c = threadIdx.x; c < C; c += blockDim.x) y[base + c] = (s[base + c] - mean) * rstd * w[c] + b[c];
}

// Rows [blockIdx.x * rows_per_block, +rows_per_block) of the backward through y = layer_norm(x): the gradient
// of x per row, plus grad_s (the gradient x has from elsewhere: kAdd, for add_ln_fwd's s) written to gx and gh;
// and this block's sums over its rows per column of grad_y * xhat (for grad_w), grad_y (grad_b) and, with kAdd,
// the gradient of s (grad_h_bias) into partial[k][blockIdx.x][c], k = 0, 1, 2. C <= kMaxColumnsPerThread *
// blockDim.x.
template <class T, bool kAdd>
__device__ void ln_bwd_rows(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ gs,
                            const T* __restrict__ gy, T* __restrict__ gx, T* __restrict__ gh, T* __restrict__ partial,
                            int rows, int C, int rows_per_block, T eps) {
  T acc_w[kMaxColumnsPerThread], acc_b[kMaxColumnsPerThread], acc_h[kMaxColumnsPerThread];
#pragma unroll
  for (int j = 0; j < kMaxColumnsPerThread; ++j) acc_w[j] = acc_b[j] = acc_h[j] = T(0);
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
        T d = rstd * (g * w[c] - a - xhat * bsum);
        if (kAdd) {
          d += gs[base + c];
          gh[base + c] = d;
          acc_h[j] += d;
        }
        gx[base + c] = d;
        acc_w[j] += g * xhat;
        acc_b[j] += g;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxColumnsPerThread; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    if (c < C) {
      partial[(long long)blockIdx.x * C + c] = acc_w[j];
      partial[((long long)gridDim.x + blockIdx.x) * C + c] = acc_b[j];
      if (kAdd) partial[(2LL * gridDim.x + blockIdx.x) * C + c] = acc_h[j];
    }
  }
}

template <class T>
__global__ void ln_bwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ gy,
                       T* __restrict__ gx, T* __restrict__ partial, int rows, int C, int rows_per_block, T eps) {
  ln_bwd_rows<T, false>(x, w, nullptr, gy, gx, nullptr, partial, rows, C, rows_per_block, eps);
}

// add_ln_fwd's backward: s is what it saved, gs and gy the incoming gradients of its outputs s and y; x and h
// both get the gradient of s (gx, gh).
template <class T>
__global__ void add_ln_bwd(const T* __restrict__ s, const T* __restrict__ w, const T* __restrict__ gs,
                           const T* __restrict__ gy, T* __restrict__ gx, T* __restrict__ gh, T* __restrict__ partial,
                           int rows, int C, int rows_per_block, T eps) {
  ln_bwd_rows<T, true>(s, w, gs, gy, gx, gh, partial, rows, C, rows_per_block, eps);
}

// out[c] = the sum over row blocks of p[rb][c], in a fixed order. Block (32, 16): threadIdx.x picks the column,
// threadIdx.y every 16th row block; the 16 slice sums are added in order through shared memory.
template <class T>
__device__ void sum_row_blocks(const T* __restrict__ p, T* __restrict__ out, int row_blocks, int C) {
  __shared__ T slice[16][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  T acc = T(0);
  if (c < C)
    for (int rb = threadIdx.y; rb < row_blocks; rb += 16) acc += p[(long long)rb * C + c];
  slice[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    T total = T(0);
    for (int k = 0; k < 16; ++k) total += slice[k][threadIdx.x];
    out[c] = total;
  }
}

// grad_w from partial[0] (blockIdx.y == 0), grad_b from partial[1] (blockIdx.y == 1).
template <class T>
__global__ void ln_grad_reduce(const T* __restrict__ partial, T* __restrict__ grad_w, T* __restrict__ grad_b,
                               int row_blocks, int C) {
  sum_row_blocks(partial + (long long)blockIdx.y * row_blocks * C, blockIdx.y == 0 ? grad_w : grad_b, row_blocks, C);
}

// As ln_grad_reduce, and grad_h_bias from partial[2] (blockIdx.y == 2).
template <class T>
__global__ void add_ln_grad_reduce(const T* __restrict__ partial, T* __restrict__ grad_w, T* __restrict__ grad_b,
                                   T* __restrict__ grad_h_bias, int row_blocks, int C) {
  T* out = blockIdx.y == 0 ? grad_w : blockIdx.y == 1 ? grad_b : grad_h_bias;
  sum_row_blocks(partial + (long long)blockIdx.y * row_blocks * C, out, row_blocks, C);
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


ln_module = jitbridge.RawModule(code=LAYER_NORM_SOURCE,
                                name_expressions=instances("ln_fwd", "ln_bwd", "ln_grad_reduce", "add_ln_fwd",
                                                           "add_ln_bwd", "add_ln_grad_reduce"))

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


def s_rows(s):
    return ln_rows(s)


def s_row_blocks(s):
    return ln_row_blocks(s)


def s_threads(s):
    return ln_threads(s)


# Beside layer_norm's checks: x is [C], [N, C] or [B, T, C] and h has its shape (rank, first and last size and
# element count: exactly the shape at these ranks), h_bias is [C].
check_add_layer_norm = check_layer_norm + (
    jt.Check(lambda x, h: (x.dim() <= 3) & (h.dim() == x.dim()) & (h.shape[0] == x.shape[0])
             & (h.shape[-1] == x.shape[-1]) & (h.numel() == x.numel()),
             "x must have shape [C], [N, C] or [B, T, C], and h the shape of x"),
    jt.Check(lambda x, h_bias: (h_bias.dim() == 1) & (h_bias.shape[0] == x.shape[-1]),
             "h_bias must have shape [C] for x of shape [..., C]"),
)

ADD_LAYER_NORM = dict(
    inputs=("x", "h", "h_bias", "weight", "bias"),
    outputs={"s": Output(like="x"), "y": Output(like="x")},
    check=check_add_layer_norm,
    forward=Launch(per_dtype(ln_module, "add_ln_fwd"),
                   args=("x", "h", "h_bias", "weight", "bias", "s", "y", size("x", -1), EPS),
                   grid=ln_rows, block=ln_threads),
    save=("s", "weight"),
    backward=(
        Launch(per_dtype(ln_module, "add_ln_bwd"),
               args=("s", "weight", "grad_s", "grad_y", "grad_x", "grad_h", "partial", s_rows, size("s", -1),
                     LN_ROWS_PER_BLOCK, EPS),
               grid=s_row_blocks, block=s_threads),
        Launch(per_dtype(ln_module, "add_ln_grad_reduce"),
               args=("partial", "grad_weight", "grad_bias", "grad_h_bias", s_row_blocks, size("s", -1)),
               grid=lambda s: (blocks(s.shape[-1], 32), 3), block=(32, 16)),
    ),
    grads={"x": Output(like="s"), "h": Output(like="s"), "h_bias": Output(like="weight"),
           "weight": Output(like="weight"), "bias": Output(like="weight")},
    scratch={"partial": Output(shape=lambda s: (3, s_row_blocks(s), s.shape[-1]))},
)
add_layer_norm = jt.custom_op("jitbridge_gpt::add_layer_norm", **ADD_LAYER_NORM)


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
