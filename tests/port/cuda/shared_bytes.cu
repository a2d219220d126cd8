// Dynamic shared memory the ways CUDA code uses it (written for xvendor's port tests): one
// `extern __shared__` buffer filled by some threads and read by others, a second `extern`
// declaration in a device function that must alias the same bytes, a 2-D block, and a
// kernel that also has static __shared__ (both count against the block's local memory).

// The dynamic buffer, as a device function sees it: the same memory as the kernel's.
__device__ int* dyn_ints() {
    extern __shared__ int dyn[];
    return dyn;
}

// Every int of the block's n_ints = shared_bytes / 4 gets a code; after the barrier each
// thread reads slots other threads wrote (reversed order, through the device function),
// so out[block, i] is right only if the block really shares n_ints ints. base_mod16[block]
// is the buffer's address modulo 16 (CUDA aligns dynamic shared memory to at least 16).
__global__ void fill_reverse(int* out, int n_ints, long long* base_mod16) {
    extern __shared__ int buf[];
    int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
    int block = blockIdx.y * gridDim.x + blockIdx.x;
    for (int i = tid; i < n_ints; i += nthreads) buf[i] = block * 1000003 + i * 7 + 1;
    __syncthreads();
    const int* same = dyn_ints();
    for (int i = tid; i < n_ints; i += nthreads) out[(long)block * n_ints + i] = same[n_ints - 1 - i];
    if (tid == 0) base_mod16[block] = (long long)((unsigned long long)buf % 16);
}

// out[block, i] = fixed[i % 4096] + dyn[n - 1 - i] with a 16 KiB static table beside the
// dynamic floats: both live in the block's local memory at once.
__global__ void static_plus_dynamic(float* out, const float* x, int n) {
    __shared__ float fixed[4096];
    extern __shared__ float dyn_f[];
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) fixed[i] = 0.5f * i;
    for (int i = threadIdx.x; i < n; i += blockDim.x) dyn_f[i] = x[(long)blockIdx.x * n + i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[(long)blockIdx.x * n + i] = fixed[i % 4096] + dyn_f[n - 1 - i];
}
