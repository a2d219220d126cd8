// Inline PTX behind __CUDA_ARCH__ checks, with a portable branch beside it: the SYCL
// compile (no __CUDA_ARCH__) takes the portable one. Unguarded PTX stays refused.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HAS_FAST_RCP
#endif

static __device__ __forceinline__ float rcp(float x) {
#ifdef HAS_FAST_RCP
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    return 1.0f / x;
#endif
}

static __device__ __forceinline__ unsigned lane_id() {
#ifdef __CUDA_ARCH__
    unsigned r;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
    return r;
#else
    return threadIdx.x % 32;
#endif
}

__global__ void recip_lane(const float * x, float * y, int * lane, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#if __CUDA_ARCH__ >= 700
        asm volatile("prefetch.global.L2 [%0];" :: "l"(x + i));
#endif
        y[i] = rcp(x[i]);
        lane[i] = lane_id();
    }
}

__global__ void live_ptx(float * y) {
    float r;
    asm("mov.f32 %0, 1.0;" : "=f"(r));
    y[threadIdx.x] = r;
}

// A library call (CUB) under a macro the file does not define: the other branch runs.
__global__ void scan_or_copy(const float * x, float * y, const int n) {
#ifdef USE_CUB_SCAN
    typedef cub::BlockScan<float, 64> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    float v = x[threadIdx.x];
    scan_t(tmp).InclusiveSum(v, v);
    y[threadIdx.x] = v;
#else
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i];
    }
#endif // USE_CUB_SCAN
}
