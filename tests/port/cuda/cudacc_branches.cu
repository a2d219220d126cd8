// Macros defined per compiler: nvcc (__CUDACC__) gets the thread-parallel one, a host
// compiler a serial loop. The port compiles what nvcc compiles.
#ifdef __CUDACC__
#define PARALLEL_IDX(V, N) \
  const int V = blockIdx.x * blockDim.x + threadIdx.x; \
  if (V >= (N)) return;
#else
#define PARALLEL_IDX(V, N) for (int V = 0; V < (N); ++V)
#endif

__global__ void index_times(float* y, float s, int n) {
  PARALLEL_IDX(i, n) {
#if defined(__CUDACC__)
    y[i] = s * i;
#else
    y[i] = -1.0f;
#endif
  }
}
