// Kernel templates reached only through function pointers: passed to a launch helper,
// taken by address and launched through the pointer, and host templates returned from a
// dispatch function whose return type is a function-pointer alias (no call site names
// their template arguments).
#include <cuda_runtime.h>

template <typename Kernel, typename... Args>
static void launch_with(Kernel kernel, const dim3 grid, const dim3 block, cudaStream_t stream, Args... args) {
    kernel<<<grid, block, 0, stream>>>(args...);
}

template <typename T, int op>
__global__ void apply(const T * x, T * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = op == 0 ? x[i] * T(2) : x[i] + T(1);
    }
}

template <typename T>
static void apply_cuda(const T * x, T * y, const int n, const int op, cudaStream_t stream) {
    const int nb = (n + 63) / 64;
    if (op == 0) {
        launch_with(apply<T, 0>, nb, 64, stream, x, y, n);
    } else {
        auto kernel = &apply<T, 1>;
        kernel<<<nb, 64, 0, stream>>>(x, y, n);
    }
}

void apply_f32(const float * x, float * y, int n, int op, cudaStream_t s) { apply_cuda(x, y, n, op, s); }

template <typename T>
using widen_cuda_t = void (*)(const float * x, T * y, int n, cudaStream_t stream);
typedef widen_cuda_t<double> to_f64_cuda_t;
typedef void (*to_f32_cuda_t)(const float * x, float * y, int n, cudaStream_t stream);

template <typename dst_t>
__global__ void widen(const float * x, dst_t * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = dst_t(x[i]) * dst_t(3);
    }
}

template <typename dst_t>
static void widen_cuda(const float * x, dst_t * y, const int n, cudaStream_t stream) {
    widen<<<(n + 63) / 64, 64, 0, stream>>>(x, y, n);
}

to_f64_cuda_t get_to_f64(int kind) {
    switch (kind) {
        case 0:
            return widen_cuda;
        default:
            return nullptr;
    }
}

to_f32_cuda_t get_to_f32(int kind) {
    return kind == 0 ? widen_cuda : nullptr;
}

// a comment inside the template arguments, and a host template called with pointer
// arithmetic (x + r * n has x's type)
template <bool negate>
__global__ void shift(const double * x, double * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = negate ? 1.0 - x[i] : x[i] - 1.0;
    }
}

template <typename T>
__global__ void halve(const T * x, T * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] / T(2);
    }
}

template <typename T>
static void halve_cuda(const T * x, T * y, const int n, cudaStream_t stream) {
    halve<<<(n + 63) / 64, 64, 0, stream>>>(x, y, n);
}

void rows_f64(const double * x, double * y, int rows, int n, cudaStream_t s) {
    for (int r = 0; r < rows; ++r) {
        launch_with(shift</*negate=*/true>, (n + 63) / 64, 64, s, x + r * n, y + r * n, n);
        halve_cuda(x + r * n, y + r * n, n, s);
    }
}

// a kernel taken by address with a local type alias as its template argument
template <int N>
struct Fill {
    static constexpr int value = N;
};

template <typename K>
__global__ void fill_value(int * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = K::value + i;
    }
}

void fill_seven(int * y, int n, cudaStream_t stream) {
    using K = Fill<7>;
    auto kernel = &fill_value<K>;
    kernel<<<(n + 63) / 64, 64, 0, stream>>>(y, n);
}

// explicit instantiations of a kernel template (no launch in this file), spelled with
// macros as libraries that compile one file per configuration do
#define KERNEL __global__
#define NEGATE true
template <bool negate, typename T>
KERNEL void fill_sign(T * y, const T v, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = negate ? -v : v;
    }
}
template KERNEL void fill_sign<NEGATE, float>(float * y, const float v, const int n);
template __global__ void fill_sign<false>(double * y, const double v, const int n);
