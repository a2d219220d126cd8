// bf16 storage with fp32 math (written for xvendor's port tests).
#include <cuda_bf16.h>

// y = gelu(x) (tanh form), bf16 in and out, math in fp32.
__global__ void gelu_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = __bfloat162float(x[i]);
        float c = 0.7978845608f * (v + 0.044715f * v * v * v);
        y[i] = __float2bfloat16(0.5f * v * (1.0f + tanhf(c)));
    }
}

// acc[i % m] += x[i] in bf16 through atomicAdd, and the fp32 row scale out = x * s.
__global__ void scale_bf16(const __nv_bfloat16* x, float* out, __nv_bfloat16 s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)(x[i] * s);
}

// Column sums with 16-bit atomics: atomicAdd on __nv_bfloat16 and on packed __half2 pairs.
__global__ void colsum_atomic16(const float* x, __nv_bfloat16* sums, __half2* pair_sums,
                                int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (c < cols && r < rows) {
        float v = x[r * cols + c];
        atomicAdd(&sums[c], __float2bfloat16(v));
        atomicAdd(&pair_sums[c], __floats2half2_rn(v, 2.0f * v));
    }
}
