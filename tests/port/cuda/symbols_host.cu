// Host launchers that write and read __constant__ / __device__ symbols
// (tests/port/test_symbols_host.py): cudaMemcpyToSymbol / cudaMemcpyFromSymbol, with an
// offset, inside and outside a launcher.
#include <cuda_runtime.h>

__constant__ float c_coef[4];  // y = c0 + c1 x + c2 x^2 + c3 x^3
__device__ int d_hits;         // how many x were > 0

__global__ void poly(const float *x, float *y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = c_coef[0] + v * (c_coef[1] + v * (c_coef[2] + v * c_coef[3]));
    if (v > 0.f) atomicAdd(&d_hits, 1);
  }
}

void set_coef(const float *h_coef) {
  cudaCheck(cudaMemcpyToSymbol(c_coef, h_coef, 4 * sizeof(float)));
}

void set_linear_terms(const float *h_c01) {
  cudaMemcpyToSymbol(c_coef, h_c01, 2 * sizeof(float), 0, cudaMemcpyHostToDevice);
}

void set_cubic(const float *h_c3) {
  cudaMemcpyToSymbol(c_coef, h_c3, sizeof(float), 3 * sizeof(float));
}

void poly_eval(const float *x, float *y, int n, const int *zero, int *h_hits, int block) {
  cudaCheck(cudaMemcpyToSymbol(d_hits, zero, sizeof(int)));
  poly<<<(n + block - 1) / block, block>>>(x, y, n);
  cudaCheck(cudaMemcpyFromSymbol(h_hits, d_hits, sizeof(int)));
}
