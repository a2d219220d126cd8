// Copies to shared memory through cuda::memcpy_async with a block-scope cuda::barrier, and
// cooperative_groups::memcpy_async + cg::wait (NOTE [synchronous async copies]); a pipeline
// stays refused.
#include <cooperative_groups.h>
#include <cuda/barrier>
#include <cuda/pipeline>
namespace cg = cooperative_groups;

#define TILE 64

// each block sums a reversed tile of x, staged twice through shared memory
__global__ void tile_sums(const float *x, float *out, int n) {
  __shared__ float a[TILE];
  __shared__ float b[TILE];
  __shared__ cuda::barrier<cuda::thread_scope::thread_scope_block> bar;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  __syncthreads();
  const int base = blockIdx.x * TILE;
  const int t = threadIdx.x;
  for (int i = t; i < TILE; i += blockDim.x) {
    float *dst = &a[TILE - 1 - i];
    if (base + i < n) cuda::memcpy_async(dst, &x[base + i], cuda::aligned_size_t<4>(sizeof(float)), bar);
    else *dst = 0.f;
  }
  bar.arrive_and_wait();
  // the whole block copies a into b (group form), then waits on the barrier's split phase
  cuda::memcpy_async(block, b, a, sizeof(a), bar);
  bar.wait(bar.arrive());
  float *c = a;  // and back again through cooperative_groups' own form
  cg::memcpy_async(block, c, b, sizeof(float) * TILE);
  cg::wait(block);
  if (t == 0) {
    float s = 0.f;
    for (int i = 0; i < TILE; ++i) s += c[i] * (i + 1);
    out[blockIdx.x] = s;
  }
}

__global__ void piped(const float *x, float *y) {
  __shared__ float s[32];
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  pipe.producer_acquire();
  cuda::memcpy_async(&s[threadIdx.x], &x[threadIdx.x], sizeof(float), pipe);
  pipe.producer_commit();
  pipe.consumer_wait();
  y[threadIdx.x] = s[threadIdx.x];
}
