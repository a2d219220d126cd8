// Device printf (float promoted as C varargs do, a string argument, no argument at all)
// and clock()/clock64() differences, as CUDA samples use them.
#include <cstdio>

__global__ void report(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 3.0f * x[i];
  if (i == 0) printf("report n=%d x0=%.2f %s\n", n, x[0], "done");
  if (i == 1) printf("second line\n");
}

__global__ void timed(const float *x, float *y, long long *ticks, int n) {
  long long t0 = clock64();
  clock_t c0 = clock();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < 64; ++k) acc += x[(i + k) % n];
  if (i < n) y[i] = acc;
  long long dt = clock64() - t0;
  if (i < n) ticks[i] = dt >= 0 && clock() - c0 >= 0 ? 1 : 0;
}
