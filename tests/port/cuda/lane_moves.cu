// cuda_fp16.h / cuda_bf16.h helpers that move lanes of a half2 / bfloat162: swap
// (rotary embeddings swap the pair's halves), broadcast one lane, pick one, pair up lows or
// highs of two, and build from a float2.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__global__ void half2_lanes(const half2 *a, const half2 *b, half2 *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  half2 x = a[i], y = b[i];
  out[5 * i + 0] = __lowhigh2highlow(x);
  out[5 * i + 1] = __low2half2(x);
  out[5 * i + 2] = __high2half2(x);
  out[5 * i + 3] = __lows2half2(x, y);
  out[5 * i + 4] = __float22half2_rn(make_float2(__high2float(y), __low2float(y)));
}

__global__ void bf162_lanes(const __nv_bfloat162 *a, const __nv_bfloat162 *b,
                            __nv_bfloat162 *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat162 x = a[i], y = b[i];
  out[6 * i + 0] = __lowhigh2highlow(x);
  out[6 * i + 1] = __low2bfloat162(x);
  out[6 * i + 2] = __high2bfloat162(x);
  out[6 * i + 3] = __highs2bfloat162(x, y);
  out[6 * i + 4] = __halves2bfloat162(__high2bfloat16(y), __low2bfloat16(x));
  out[6 * i + 5] = __float22bfloat162_rn(make_float2(__low2float(y), __high2float(x)));
}
