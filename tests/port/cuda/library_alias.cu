// CUB named through a project's own namespace alias and through a macro (NOTE [library
// through an alias or a macro]): both kernels are refused for the library call; the
// alias's declaration does not reach the SYCL build, so the plain kernel still compiles.
#if defined(USE_ROCM)
#include <hipcub/hipcub.hpp>
namespace my_cub = hipcub;
#else
#include <cub/cub.cuh>
namespace my_cub = cub;
#endif
namespace my_cub2 = my_cub;
#define MY_SUM_OP cub::Sum()

template <int THREADS>
__global__ void block_sum(const float *x, float *out) {
  using BlockReduce = my_cub::BlockReduce<float, THREADS>;
  __shared__ typename BlockReduce::TempStorage tmp;
  float s = BlockReduce(tmp).Sum(x[blockIdx.x * THREADS + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

__global__ void pair_sum(const float *x, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  auto op = MY_SUM_OP;
  if (i < n) out[i] = op(x[2 * i], x[2 * i + 1]);
}

__global__ void alias_of_alias(const float *x, float *out) {
  typedef my_cub2::WarpReduce<float> WR;
  __shared__ typename WR::TempStorage tmp;
  out[threadIdx.x] = WR(tmp).Sum(x[threadIdx.x]);
}

__global__ void twice(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}

void launch(const float *x, float *out, int blocks) {
  block_sum<128><<<blocks, 128>>>(x, out);
}
