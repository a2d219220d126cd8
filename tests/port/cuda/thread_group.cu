// cooperative_groups::thread_group: one device function serving a whole block and tiles
// (as a compile-time tile and as a run-time tiled_partition(g, n)).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ int group_sum(cg::thread_group g, int *x, int val) {
  int lane = g.thread_rank();
  for (int i = g.size() / 2; i > 0; i /= 2) {
    x[lane] = val;
    g.sync();
    if (lane < i) val += x[lane + i];
    g.sync();
  }
  return val;  // thread 0 of the group has the sum
}

__global__ void sums(const int *in, int *block_out, int *tile_out, int *rt_out) {
  extern __shared__ int ws[];
  cg::thread_block b = cg::this_thread_block();
  int t = b.thread_rank();
  int v = in[blockIdx.x * blockDim.x + t];
  int s = group_sum(b, ws, v);
  if (t == 0) block_out[blockIdx.x] = s;
  b.sync();
  cg::thread_block_tile<16> t16 = cg::tiled_partition<16>(b);
  int s16 = group_sum(t16, ws + (t / 16) * 16, v);
  if (t16.thread_rank() == 0) tile_out[(blockIdx.x * blockDim.x + t) / 16] = s16;
  b.sync();
  cg::thread_group t8 = cg::tiled_partition(b, 8);
  int s8 = group_sum(t8, ws + (t / 8) * 8, v);
  if (t8.thread_rank() == 0) rt_out[(blockIdx.x * blockDim.x + t) / 8] = s8;
}
