// One kernel whose program fails at the JIT's link step: it calls a device function of
// another translation unit (relocatable device code), which the SYCL program lacks. The
// other kernels link.
extern "C" __device__ float scale_from_other_unit(float);

__global__ void add_one(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] + 1.0f;
    }
}

__global__ void scale_elsewhere(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = scale_from_other_unit(x[i]);
    }
}

__global__ void twice(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = 2.0f * x[i];
    }
}

__global__ void negate(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = -x[i];
    }
}
