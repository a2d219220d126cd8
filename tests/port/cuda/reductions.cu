// Reductions the way CUDA code writes them: warp shuffles, cooperative groups, dynamic
// shared memory, atomics (written for xvendor's port tests).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <float.h>
namespace cg = cooperative_groups;

#define FULL_MASK 0xffffffff

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        v += __shfl_down_sync(FULL_MASK, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int mask = 16; mask > 0; mask >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, mask));
    return v;
}

// out[row] = sum(x[row, :]); one block per row, warp shuffles then one warp over the partials.
__global__ void row_sum_shfl(const float* x, float* out, int cols) {
    __shared__ float partial[32];
    const float* xr = x + (long)blockIdx.x * cols;
    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) v += xr[c];
    v = warp_sum(v);
    int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int n_warps = (blockDim.x + warpSize - 1) / warpSize;
    v = (threadIdx.x < n_warps) ? partial[threadIdx.x] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// out[row] = max(x[row, :]); one warp per row via cooperative groups' tiled_partition/reduce.
__global__ void row_max_cg(const float* x, float* out, int rows, int cols) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (row >= rows) return;
    float m = -FLT_MAX;
    for (int c = warp.thread_rank(); c < cols; c += warp.size()) m = fmaxf(m, x[(long)row * cols + c]);
    m = cg::reduce(warp, m, cg::greater<float>());
    if (warp.thread_rank() == 0) out[row] = m;
}

// Row softmax with the row staged in dynamic shared memory (cols floats per block).
__global__ void softmax_dyn_smem(const float* x, float* y, int cols) {
    extern __shared__ float row[];
    __shared__ float red[32];
    const float* xr = x + (long)blockIdx.x * cols;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) { row[c] = xr[c]; m = fmaxf(m, row[c]); }
    m = warp_max(m);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    if (threadIdx.x == 0) { for (int w = 1; w < n_warps; ++w) red[0] = fmaxf(red[0], red[w]); }
    __syncthreads();
    m = red[0];
    __syncthreads();
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) { row[c] = expf(row[c] - m); s += row[c]; }
    s = warp_sum(s);
    if (lane == 0) red[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) { for (int w = 1; w < n_warps; ++w) red[0] += red[w]; }
    __syncthreads();
    float inv = 1.0f / red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[(long)blockIdx.x * cols + c] = row[c] * inv;
}

// Histogram: per-block counts in shared memory, merged into global with atomics; also
// the global maximum (atomicMax on int keys) and a count of values above a threshold
// with atomicInc (wraps at `limit`, as CUDA's does).
__global__ void histogram_atomic(const int* keys, int n, int* bins, int n_bins, int* max_key,
                                 unsigned int* above, int threshold, unsigned int limit) {
    extern __shared__ int local_bins[];
    for (int b = threadIdx.x; b < n_bins; b += blockDim.x) local_bins[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int k = keys[i];
        atomicAdd(&local_bins[k % n_bins], 1);
        atomicMax(max_key, k);
        if (k > threshold) atomicInc(above, limit);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < n_bins; b += blockDim.x) atomicAdd(&bins[b], local_bins[b]);
}

// Sum of floats with atomicAdd on float, and a running minimum built on atomicCAS.
__device__ float atomic_min_float(float* addr, float value) {
    int* a = (int*)addr;
    int old = *a, assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) <= value) break;
        old = atomicCAS(a, assumed, __float_as_int(value));
    } while (assumed != old);
    return __int_as_float(old);
}

__global__ void sum_min_atomic(const float* x, int n, float* sum, float* mn) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(sum, x[i]);
        atomic_min_float(mn, x[i]);
    }
}

void row_sum(const float* x, float* out, int rows, int cols, int block) {
    row_sum_shfl<<<rows, block>>>(x, out, cols);
}

void softmax(const float* x, float* y, int rows, int cols, int block) {
    softmax_dyn_smem<<<rows, block, cols * sizeof(float)>>>(x, y, cols);
}

// A cooperative-groups reduction with a user combine function on a struct (passed by
// name, as CUDA code does), and CUDA's mixed-type min(int, unsigned).
struct SumMax { float sum; float max; };

__device__ SumMax combine_sum_max(SumMax a, SumMax b) {
    return {a.sum + b.sum, fmaxf(a.max, b.max)};
}

__global__ void row_sum_max_cg(const float* x, float* sums, float* maxes, int rows, int cols) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (row >= rows) return;
    SumMax p = {0.0f, -FLT_MAX};
    for (unsigned c = warp.thread_rank(); c < cols + 31u; c += 32u) {
        float v = x[(long)row * cols + min(cols - 1, c)];  // clamped read, as llm.c does
        if (c < (unsigned)cols) p = combine_sum_max(p, {v, v});
    }
    SumMax r = cg::reduce(warp, p, combine_sum_max);
    if (warp.thread_rank() == 0) { sums[row] = r.sum; maxes[row] = r.max; }
}
