// Braces opened in #if branches and closed after the #endif, inside a kernel and inside the
// host function that launches a kernel template: one branch is taken (as the SYCL
// compile's preprocessor would take it), the kernels are reported and instantiated.
#define FAST_PATH 0
#define LEVEL 2

template <bool square>
__global__ void split_kernel(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
#if FAST_PATH
    if (i < n && x[i] > 0.0f) {
        y[i] = x[i];
#elif LEVEL >= 2 && !defined(NO_SQUARE)
    if (i < n) {
        y[i] = square ? x[i] * x[i] : x[i];
#else
    if (i < n) {
        y[i] = -x[i];
#endif
        y[i] += 1.0f;
    }
}

__global__ void after_split(float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] *= 2.0f;
    }
}

void run_split(const float * x, float * y, int n, int big, cudaStream_t stream) {
    if ((n > 0) &&
#ifdef USE_GRAPHS
        (big > 1)) {
#else
        (big > 0)) {
#endif
        split_kernel</*square=*/true><<<(n + 63) / 64, 64, 0, stream>>>(x, y, n);
        after_split<<<(n + 63) / 64, 64, 0, stream>>>(y, n);
    }
}
