// Kernels with latent races that happen to work on many GPUs (written for xvendor's port
// tests): the lints must flag them.

// Block sum whose thread 0 publishes the total in shared[0], read by every thread
// without a barrier in between: another warp may read it before it is written.
__global__ void normalize_racy(const float* x, float* y, int n) {
    __shared__ float shared[256];
    int t = threadIdx.x;
    float v = (t < n) ? x[t] : 0.0f;
    shared[t] = v;
    __syncthreads();
    if (t == 0) {
        float s = 0.0f;
        for (int i = 0; i < blockDim.x; ++i) s += shared[i];
        shared[0] = s;
    }
    float total = shared[0];
    if (t < n) y[t] = v / total;
}

// Returns early for out-of-range threads, then waits on a barrier the others never reach.
__global__ void early_exit(const float* x, float* y, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    tile[threadIdx.x] = x[i];
    __syncthreads();
    y[i] = tile[threadIdx.x] + tile[(threadIdx.x + 1) % blockDim.x];
}

// A half-warp mask: the lanes outside it do not take part in CUDA.
__global__ void half_warp_sum(const float* x, float* y) {
    float v = x[threadIdx.x];
    if (threadIdx.x < 16) v += __shfl_down_sync(0x0000ffff, v, 8);
    y[threadIdx.x] = v;
}

// Everyone reads the leader's s[0], and the leaders overwrite their slots right away:
// warp 0's leader may overwrite s[0] before another warp has read it (write after read).
__global__ void reuse_racy(const float* x, float* y) {
    __shared__ float s[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = x[threadIdx.x];
    if (lane == 0) s[warp] = v;
    __syncthreads();
    float first = s[0];
    if (lane == 0) s[warp] = v * first;
    __syncthreads();
    y[threadIdx.x] = s[warp];
}
