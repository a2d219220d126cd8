// Constructs the port refuses, each in its own kernel (written for xvendor's port tests).
__constant__ float coeffs[16];
texture<float, 1, cudaReadModeElementType> tex;

__global__ void uses_constant(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = coeffs[i % 16];
}

__global__ void uses_texture(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = tex1Dfetch(tex, i);
}

__global__ void uses_ptx(int* y) {
    int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    y[threadIdx.x] = lane;
}

__global__ void uses_malloc(float* y) {
    float* scratch = (float*)malloc(16 * sizeof(float));
    scratch[0] = 1.0f;
    y[0] = scratch[0];
    free(scratch);
}

__global__ void fine(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * i;
}
