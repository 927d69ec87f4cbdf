"""pasted_style_kernels.py — layer-norm forward kernels written for the tests in the style of pasted training code.

The source uses what such pasted files typically rely on: C standard headers (<stdio.h>, <stdlib.h>, <assert.h>),
<cuda_runtime.h>, cooperative groups with cg::reduce, a `namespace cg` alias, C++ linkage (no extern "C"), a
__shfl_xor_sync warp sum, __ldcs/__stcs streaming loads and stores, rsqrtf, static and dynamic shared memory.
Written from scratch for jitbridge's tests; shared by test_pasted_style_kernels.py (compile only, CPU) and
test_pasted_style_gpu.py (launched and checked against torch).
"""

LAYERNORM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <assert.h>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

#define LN_EPSILON 1e-5f

// Butterfly sum over the 32 lanes of a full warp; every lane ends with the total.
__device__ inline float lanes_sum(float v) {
    for (int step = 16; step >= 1; step >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, step);
    }
    return v;
}

// Block-wide sum of v: each 32-thread tile reduces with cg::reduce, tile leaders park their totals in
// `parked` (32 floats of shared memory), then every tile reduces the parked totals. Every thread gets the
// total. Needs blockDim.x to be a multiple of 32, at most 1024.
__device__ float block_sum(cg::thread_block block, cg::thread_block_tile<32> tile, float v, float* parked) {
    const float mine = cg::reduce(tile, v, cg::plus<float>());
    if (tile.thread_rank() == 0) {
        parked[tile.meta_group_rank()] = mine;
    }
    block.sync();
    float t = tile.thread_rank() < tile.meta_group_size() ? parked[tile.thread_rank()] : 0.0f;
    t = cg::reduce(tile, t, cg::plus<float>());
    block.sync();  // `parked` is free again for the caller's next sum
    return t;
}

// Variant A: one warp per row, two passes over global memory (the mean, then the centred squares).
__global__ void ln_forward_warp_per_row(float* out, float* mean, float* rstd, const float* inp,
                                        const float* weight, const float* bias, int N, int C) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) {
        return;  // whole warps leave together: a row belongs to exactly one warp
    }
    const float* x = inp + (size_t)row * C;
    float acc = 0.0f;
    for (int c = lane; c < C; c += 32) {
        acc += x[c];
    }
    const float mu = lanes_sum(acc) / (float)C;
    acc = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = x[c] - mu;
        acc += d * d;
    }
    const float inv = rsqrtf(lanes_sum(acc) / (float)C + LN_EPSILON);
    if (lane == 0) {
        __stcs(mean + row, mu);
        __stcs(rstd + row, inv);
    }
    float* y = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        __stcs(y + c, (__ldcs(x + c) - mu) * inv * weight[c] + bias[c]);
    }
}

// Variant B: one block per row; one pass gathers sum(x) and sum(x*x), combined across warps through a
// static shared array.
__global__ void ln_forward_block_per_row(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int N, int C) {
    __shared__ float parked[32];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    assert(blockDim.x % 32 == 0);
    const int row = blockIdx.x;
    if (row >= N) {
        return;  // the whole block leaves
    }
    const float* x = inp + (size_t)row * C;
    float s1 = 0.0f, s2 = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float v = x[c];
        s1 += v;
        s2 += v * v;
    }
    const float mu = block_sum(block, tile, s1, parked) / (float)C;
    const float var = fmaxf(block_sum(block, tile, s2, parked) / (float)C - mu * mu, 0.0f);
    const float inv = rsqrtf(var + LN_EPSILON);
    if (block.thread_rank() == 0) {
        __stcs(mean + row, mu);
        __stcs(rstd + row, inv);
    }
    float* y = out + (size_t)row * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        __stcs(y + c, (__ldcs(x + c) - mu) * inv * weight[c] + bias[c]);
    }
}

// Variant C: one block per row; the row is read from global memory once (streaming) into dynamic shared
// memory (C floats, given at launch), and both passes and the output read the cached copy.
__global__ void ln_forward_cached_row(float* out, float* mean, float* rstd, const float* inp,
                                      const float* weight, const float* bias, int N, int C) {
    extern __shared__ float row_cache[];
    __shared__ float parked[32];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    const int row = blockIdx.x;
    if (row >= N) {
        return;
    }
    const float* x = inp + (size_t)row * C;
    float acc = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float v = __ldcs(x + c);
        row_cache[c] = v;
        acc += v;
    }
    const float mu = block_sum(block, tile, acc, parked) / (float)C;  // its first sync publishes row_cache
    acc = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float d = row_cache[c] - mu;
        acc += d * d;
    }
    const float inv = rsqrtf(block_sum(block, tile, acc, parked) / (float)C + LN_EPSILON);
    if (threadIdx.x == 0) {
        __stcs(mean + row, mu);
        __stcs(rstd + row, inv);
    }
    float* y = out + (size_t)row * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        __stcs(y + c, (row_cache[c] - mu) * inv * weight[c] + bias[c]);
    }
}
"""

# The kernels' names (C++ linkage: found by their demangled names) and their common signature.
KERNELS = ("ln_forward_warp_per_row", "ln_forward_block_per_row", "ln_forward_cached_row")
SIGNATURE = "(float*, float*, float*, float const*, float const*, float const*, int, int)"


def launch_shape(kernel, n_rows, n_cols, block):
    """(grid, dynamic shared memory in bytes) for one of KERNELS over n_rows rows of n_cols floats."""
    if kernel == "ln_forward_warp_per_row":
        return (n_rows * 32 + block - 1) // block, 0
    if kernel == "ln_forward_block_per_row":
        return n_rows, 0
    if kernel == "ln_forward_cached_row":
        return n_rows, n_cols * 4
    raise KeyError(kernel)
