// A __device__ global declared const with an initializer (read-only like a __constant__
// one), inside a namespace and brought in by a using-declaration.
namespace cubic {
__device__ const float a = -0.75f;
static __device__ const float weights[3] = {0.25f, 0.5f, 0.25f};

static __device__ float kernel_weight(float x) {
    return ((a + 2) * x - (a + 3)) * x * x + 1;
}
}  // namespace cubic

__global__ void cubic_weight(const float * x, float * y, const int n) {
    using cubic::kernel_weight;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = kernel_weight(x[i]) * cubic::weights[i % 3];
    }
}

// initialized __device__ globals: one only read (a const global), one written by a kernel
// (stays a symbol the host must set: refused)
struct Pair {
    int a, b;
};
__device__ Pair pairs[] = {{0, 1}, {1, 2}, {2, 0}};
__device__ int counter = 5;

__global__ void pair_sum(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[pairs[i % 3].a] + x[pairs[i % 3].b];
    }
}

__global__ void bump(int * out) {
    counter += 1;
    *out = counter;
}
