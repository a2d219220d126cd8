// The device runtime's cudaFree / cudaMalloc called from a kernel: device-heap memory.
__global__ void free_lines(float **bufs, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) cudaFree(bufs[i]);
}

__global__ void scale(float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= 3.0f;
}

void host(float **bufs, float *y, int n)
{
    free_lines<<<1, 32>>>(bufs, n);
    scale<<<1, 32>>>(y, n);
    cudaFree(y);  // host code: no refusal
}
