// A local variable named like a device function (here a member function and a free one),
// passed as an argument: it is the variable, not a function to wrap in a lambda.
struct Bins {
  const int *c;
  __device__ int count(int i) const { return c[i]; }
};

__device__ int scale(int v) { return 3 * v; }

__device__ int twice(int v) { return 2 * v; }

template <class F> __device__ int apply(F f, int v) { return f(v); }

__global__ void reserve(const int *counts, int *next, int *start, int *scaled, int nb) {
  Bins bins{counts};
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    const int count = bins.count(b);
    start[b] = atomicAdd(next + b % 4, count);
    int scale = count + 1;
    scaled[b] = max(scale, 0) + apply(twice, count);
  }
}
