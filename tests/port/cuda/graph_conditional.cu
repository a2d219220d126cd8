// A kernel that sets a CUDA graph's conditional node from device code (the CUDA-graph
// device API: cudaGraphSetConditional) beside a plain kernel of the same file.
#include <cuda_runtime.h>

__global__ void set_loop_flag(cudaGraphConditionalHandle handle, const int *remaining) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        cudaGraphSetConditional(handle, *remaining > 0 ? 1 : 0);
    }
}

__global__ void count_down(int *remaining) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        *remaining -= 1;
    }
}
