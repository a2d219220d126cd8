// cuda_fp16.h's half2 one-operand, min/max, comparison and math helpers, and the raw
// storage structs (__half_raw: bits in .x, converting to and from half keeps them).
#include <cuda_fp16.h>

__global__ void h2_ops(const half2 *a, const half2 *b, half2 *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  half2 x = a[i], y = b[i];
  out[8 * i + 0] = __hneg2(x);
  out[8 * i + 1] = __habs2(x);
  out[8 * i + 2] = __hmax2(x, y);
  out[8 * i + 3] = __hmin2(x, y);
  out[8 * i + 4] = __hgt2(x, y);
  out[8 * i + 5] = __hbge2(x, y) ? __float2half2_rn(1.0f) : __float2half2_rn(0.0f);
  half2 p = __habs2(x);
  out[8 * i + 6] = h2sqrt(p);
  out[8 * i + 7] = h2exp(__hmin2(x, __float2half2_rn(2.0f)));
}

// the add-on-bits CAS pattern: a half added into its 16-bit half of a 32-bit word
__device__ void add_half_bits(half *address, half val) {
  unsigned int *word = (unsigned int *)((char *)address - ((size_t)address & 2));
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    __half_raw r;
    r.x = (size_t)address & 2 ? (old >> 16) : (old & 0xffff);
    half sum = __hadd(r, val);
    r = __half_raw(sum);
    old = (size_t)address & 2 ? (old & 0xffff) | ((unsigned)r.x << 16) : (old & 0xffff0000) | r.x;
    old = atomicCAS(word, assumed, old);
  } while (assumed != old);
}

__global__ void bucket_sum(const half *x, const int *bucket, half *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) add_half_bits(out + bucket[i], x[i]);
}
