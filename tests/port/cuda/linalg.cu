// Dense kernels in the styles CUDA code uses: a shared-memory tiled matmul, a float4
// packed-load axpy, and a templated element-wise kernel (written for xvendor's port tests).
#include <cuda_runtime.h>
#include <cstdio>

#define TILE 16

// C[M,N] = A[M,K] @ B[K,N], row-major; one output per thread, TILE x TILE tiles in shared.
__global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];  // +1: no bank conflicts on the transposed read
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int ak = t * TILE + threadIdx.x, bk = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[bk * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

// y = a * x + y with 128-bit loads; n4 = number of float4 groups, the tail is scalar.
__global__ void axpy_float4(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int n4 = n / 4;
    if (i < n4) {
        float4 xv = reinterpret_cast<const float4*>(x)[i];
        float4 yv = reinterpret_cast<float4*>(y)[i];
        yv.x += a * xv.x; yv.y += a * xv.y; yv.z += a * xv.z; yv.w += a * xv.w;
        reinterpret_cast<float4*>(y)[i] = yv;
    }
    int tail = n4 * 4 + i;
    if (i < n - n4 * 4) y[tail] += a * x[tail];
}

// out[i] = in[i] * scale + bias, each thread handling ITEMS elements strided by the grid.
template <typename T, int ITEMS>
__global__ void scale_bias(T* out, const T* in, T scale, T bias, long n) {
    long base = (long)blockIdx.x * blockDim.x * ITEMS + threadIdx.x;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        long i = base + (long)j * blockDim.x;
        if (i < n) out[i] = in[i] * scale + bias;
    }
}

void launch_matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_tiled<<<grid, block>>>(A, B, C, M, N, K);
}

void launch_scale_bias(float* out, const float* in, float s, float b, long n, int block) {
    int grid = (n + block * 4 - 1) / (block * 4);
    scale_bias<float, 4><<<grid, block>>>(out, in, s, b, n);
}

void launch_scale_bias_double(double* out, const double* in, double s, double b, long n) {
    scale_bias<double, 2><<<(n + 255) / 256, 128>>>(out, in, s, b, n);
}

// A template whose argument is deduced from the launch site's argument types.
template <typename T>
__global__ void fill_iota(T* out, T start, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = start + (T)i;
}

void launch_fill(float* out, float start, int n) {
    fill_iota<<<(n + 127) / 128, 128>>>(out, start, n);
}

// The block size as a template argument, chosen at run time by a dispatch (a CUDA idiom
// for unrolled reductions): the launch site gives no constant instantiation.
template <int BLOCK>
__global__ void block_sum(const float* x, float* out, int n) {
    __shared__ float s[BLOCK];
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += BLOCK) v += x[(long)blockIdx.x * n + i];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

void launch_block_sum(const float* x, float* out, int rows, int n, int block_size) {
    auto launch = [&](auto bs) { block_sum<bs.value><<<rows, bs.value>>>(x, out, n); };
    if (block_size == 64) launch(std::integral_constant<int, 64>{});
    else launch(std::integral_constant<int, 256>{});
}
