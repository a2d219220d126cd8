// volatile __shared__ arrays and scalars (the pre-Volta idiom for warp-synchronous code).
#define BS 64

__global__ void block_sums(const float *x, float *out, int n)
{
    volatile __shared__ float buf[BS];
    __shared__ volatile int count;
    int i = blockIdx.x * BS + threadIdx.x;
    if (threadIdx.x == 0) count = 0;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = BS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (i < n) atomicAdd((int *)&count, 1);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0] + 1000.0f * count;
}
