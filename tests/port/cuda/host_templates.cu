// Template kernels whose arguments come only through host templates: a switch on the block
// size inside a host template (T deduced from its caller's arguments), that caller bound by
// an explicit instantiation, another by an explicit call. Also: an include guard around the
// whole file, `#ifdef __CUDACC__` around qualifiers, a using-directive of a host header's
// namespace, an extern "C" kernel.
#ifndef HOST_TEMPLATES_CU
#define HOST_TEMPLATES_CU

#include <chrono>
#include <cstdio>
using namespace std::chrono;

#ifdef __CUDACC__
__host__ __device__
#endif
    inline float twice(float v) { return 2.0f * v; }

template <class T, unsigned int blockSize>
__global__ void block_sum(const T *x, T *out, unsigned int n) {
  __shared__ T s[blockSize];
  unsigned int t = threadIdx.x, i = blockIdx.x * blockSize + threadIdx.x;
  s[t] = i < n ? T(twice(float(x[i]))) : T(0);
  __syncthreads();
  for (unsigned int k = blockSize / 2; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

template <class T>
void launch_sum(int threads, int blocks, const T *x, T *out, unsigned int n) {
  switch (threads) {
    case 128: block_sum<T, 128><<<blocks, threads>>>(x, out, n); break;
    case 64: block_sum<T, 64><<<blocks, threads>>>(x, out, n); break;
  }
}

template <class T> void run_sum(const T *x, T *out, unsigned int n) {
  auto t0 = steady_clock::now();
  launch_sum(128, (n + 127) / 128, x, out, n);
  printf("%lld\n", (long long)(steady_clock::now() - t0).count());
}
template void run_sum<float>(const float *, float *, unsigned int);

extern "C" __global__ void scale_c(float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * y[i];
}

int main() {
  double *a = nullptr, *b = nullptr;
  launch_sum<double>(64, 1, a, b, 10);
  return 0;
}
#endif
