// Publish a value, then a flag, with a system-scope fence between them (as a kernel
// signalling the host or a peer device through host-mapped memory does).
__global__ void publish(const float * x, float * data, volatile int * flags, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] = 2.0f * x[i] + 1.0f;
        __threadfence_system();
        flags[i] = 1;
    }
}
