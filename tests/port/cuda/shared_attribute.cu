// A __shared__ array with a C++ attribute before it ([[maybe_unused]]: used only in some
// instantiations), static and extern.
template <bool use_second>
__global__ void block_reverse(const float * x, float * y, const int n) {
    [[maybe_unused]] __shared__ float second[64];
    __shared__ float buf[64];
    [[maybe_unused]] extern __shared__ float dyn[];
    const int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? x[i] : 0.0f;
    if (use_second) {
        second[t] = 2.0f * buf[t];
    }
    __syncthreads();
    if (i < n) {
        y[i] = use_second ? second[blockDim.x - 1 - t] : buf[blockDim.x - 1 - t];
    }
}

void reverse_both(const float * x, float * y, const int n, cudaStream_t stream) {
    block_reverse<true><<<(n + 63) / 64, 64, 0, stream>>>(x, y, n);
    block_reverse<false><<<(n + 63) / 64, 64, 0, stream>>>(x, y, n);
}
