// The CUDA kernel language beyond the basics, in one file so it builds once (written for
// xvendor's port tests). Host code here must never reach the SYCL compiler: the host class
// below uses host-only APIs and would break every kernel if it did.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <vector>
#include "kl_math.cuh"  // in ./include: needs -I
namespace cg = cooperative_groups;

#define DEVICE_INLINE __device__ __forceinline__

class StreamPool {  // host class: cudaStream_t, std::vector
 public:
  StreamPool() { streams_.resize(4); for (auto &s : streams_) cudaStreamCreate(&s); }
  ~StreamPool() { for (auto &s : streams_) cudaStreamDestroy(s); }
 private:
  std::vector<cudaStream_t> streams_;
};

struct Affine {  // by value; a device member function with shared scratch
  float scale, shift;
  __device__ float apply(float v) const {
    __shared__ float bias[1];
    if (threadIdx.x == 0) bias[0] = shift;
    __syncthreads();
    return scale * v + bias[0];
  }
  void print_on_host() const { cudaDeviceSynchronize(); }
};

DEVICE_INLINE float square(float x) { return x * x; }

__global__ void affine_square(Affine a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = a.apply(i < n ? x[i] : 0.0f);  // every thread reaches the barrier inside
  if (i < n) y[i] = kl_twice(square(v));
}

__global__ void bytes_and_ints(const uchar4 *px, unsigned *out, unsigned *max_seen, int n) {
  int i = __mul24(blockIdx.x, blockDim.x) + threadIdx.x;
  if (i >= n) return;
  uchar4 p = px[i];
  uchar4 q = make_uchar4(p.w, p.z, p.y, p.x);  // byte reversal
  unsigned packed = q.x | (q.y << 8) | (q.z << 16) | ((unsigned)q.w << 24);
  out[2 * i] = packed;
  out[2 * i + 1] = __umulhi(packed, 0x9E3779B9u) + __popc(packed);
  atomicMax(max_seen, packed);  // unsigned overload
}

__global__ void finite_sum(const float *x, float *sums, int n) {
  cg::thread_block block = cg::this_thread_block();
  __shared__ float part[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = 0.0f;
#if defined(KL_FLUSH_NONFINITE)
  float keep = 0.0f;
#else
  float keep = -1.0f;
#endif
  if (i < n) v = isfinite(x[i]) ? x[i] : keep;
  part[threadIdx.x] = v;
  cg::sync(block);
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    cg::sync(block);
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = part[0];
}

template <typename T, int Unroll = 2>
__global__ void scale_unrolled(T *y, T alpha, int n) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * Unroll;
#pragma unroll
  for (int u = 0; u < Unroll; ++u)
    if (base + u < n) y[base + u] *= alpha;
}

void launch_all(float *x, float *y, unsigned *o, unsigned *m, float *s, int n) {
  StreamPool pool;
  const int kUnroll = 4;
  scale_unrolled<float, kUnroll><<<(n + 255) / 256, 64>>>(y, 2.0f, n);  // local constant
  scale_unrolled<float><<<(n + 127) / 128, 64>>>(y, 0.5f, n);             // the default
}
template <typename T> void launch_all_typed(T *p) { StreamPool pool; }
template void launch_all_typed<float>(float *);  // a host explicit instantiation

__constant__ float kTaps[3] = {0.25f, 0.5f, 0.25f};  // initialized, never written by the host
__constant__ const float kEps = 1e-3f;

__global__ void smooth3(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1) y[i] = kTaps[0] * x[i - 1] + kTaps[1] * x[i] + kTaps[2] * x[i + 1] + kEps;
}

__constant__ float c_gain[4];          // written by the host (cudaMemcpyToSymbol)
__device__ unsigned int n_written = 0;  // a device counter the host reads back

__device__ float gain_of(int i) { return c_gain[i & 3]; }

__global__ void apply_gain(float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] *= gain_of(i);
    atomicAdd(&n_written, 1u);
  }
}
