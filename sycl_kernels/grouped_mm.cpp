// grouped_mm: ragged and batched GEMM over groups, offsets read on the device.
//
// CUDA -> SYCL, as ported here:
//   __global__ void grouped_gemm(...)      -> XV_KERNEL(3) void gmm_rows_<in>_<out>(...) and
//                                             gmm_batch_<in>_<out>(...): free functions at
//                                             namespace scope, nd_range_kernel<3>
//   blockIdx.z (group), blockIdx.y/x       -> it.get_group(0), it.get_group(1), it.get_group(2)
//   threadIdx.y / threadIdx.x              -> it.get_local_id(1) / it.get_local_id(2) (gemm_tile.h)
//   const int* __restrict__ offs (device)  -> const int32_t *offs, read by every work-group
//   early `return` of a whole block        -> the same: a work-group-uniform return before the
//                                             first group_barrier is legal in SYCL too
//   __shared__ tiles, __syncthreads        -> work_group_static, group_barrier (gemm_tile.h)
//
// gmm_rows: rows of `a` are ragged (2D x 3D, the MoE forward; 3D x 2D runs here too, as the
//   transposed problem out^T = b^T @ a[g]^T, by strides). Dimension 1 of the grid is a list of
//   row-tile slots; each work-group scans offs to find its (group, row tile): group g owns
//   rows [offs[g-1], offs[g]) and ceil(rows / BM) slots, then a virtual group G owns the rows
//   past offs[G-1], which are written as zeros. R/BM + G + 1 slots always suffice (each
//   segment wastes less than one tile); surplus slots return at once. Empty groups own no
//   slot. Bias is bias[g * bias_sg + m * bias_sm + n * bias_sn] (fp32).
// gmm_batch: grid dimension 0 is the group. Without offs (nullptr) it is the batched 3D x 3D
//   product; with offs the K range of group g is [offs[g-1], offs[g]) (2D x 2D, the weight
//   gradient; an empty range gives bias only). Output (G, M, N) contiguous, bias (G, N).
#include "gemm_tile.h"

namespace xv::gemm {

template <class TI, class TO>
inline void rows_body(const TI *a, const TI *b, const int32_t *offs, const float *bias, TO *out,
                      int64_t R, int64_t N, int64_t K, int64_t G, int64_t sa_r, int64_t sa_k,
                      int64_t sb_g, int64_t sb_k, int64_t sb_n, int64_t bias_sg,
                      int64_t bias_sm, int64_t bias_sn, int64_t so_r, int64_t so_n) {
  static syclex::work_group_static<ATile> As;
  static syclex::work_group_static<BTile> Bs;
  sycl::nd_item<3> it = item3();
  int64_t slot = static_cast<int64_t>(it.get_group(1));
  int64_t start = 0, g = 0;
  for (; g <= G; ++g) {  // g == G: the rows past the last group
    const int64_t end = g < G ? static_cast<int64_t>(offs[g]) : R;
    const int64_t tiles = end > start ? (end - start + BM - 1) / BM : 0;
    if (slot < tiles) break;
    slot -= tiles;
    start = end;
  }
  if (g > G) return;  // surplus slot: uniform across the work-group, before any barrier
  const int64_t end = g < G ? static_cast<int64_t>(offs[g]) : R;
  const int64_t m0 = start + slot * BM;
  const int64_t n0 = static_cast<int64_t>(it.get_group(2)) * BN;
  const bool live = g < G;
  tile<TI, TO>(it, As, Bs, Mat<TI>{a, sa_r, sa_k}, Mat<TI>{b + (live ? g : 0) * sb_g, sb_k, sb_n},
               0, live ? K : 0, m0, end, n0, N, live ? bias + (bias ? g * bias_sg : 0) : nullptr,
               bias_sm, bias_sn, out, so_r, so_n);
}

template <class TI, class TO>
inline void batch_body(const TI *a, const TI *b, const int32_t *offs, const float *bias, TO *out,
                       int64_t M, int64_t N, int64_t K, int64_t sa_g, int64_t sa_m,
                       int64_t sa_k, int64_t sb_g, int64_t sb_k, int64_t sb_n) {
  static syclex::work_group_static<ATile> As;
  static syclex::work_group_static<BTile> Bs;
  sycl::nd_item<3> it = item3();
  const int64_t g = static_cast<int64_t>(it.get_group(0));
  const int64_t k0 = offs ? (g > 0 ? static_cast<int64_t>(offs[g - 1]) : 0) : 0;
  const int64_t k1 = offs ? static_cast<int64_t>(offs[g]) : K;
  const int64_t m0 = static_cast<int64_t>(it.get_group(1)) * BM;
  const int64_t n0 = static_cast<int64_t>(it.get_group(2)) * BN;
  tile<TI, TO>(it, As, Bs, Mat<TI>{a + g * sa_g, sa_m, sa_k}, Mat<TI>{b + g * sb_g, sb_k, sb_n},
               k0, k1, m0, M, n0, N, bias ? bias + g * N : nullptr, 0, 1, out + g * M * N, N, 1);
}

}  // namespace xv::gemm

#define XV_GMM_KERNELS(in, out, TI, TO)                                                       \
  XV_KERNEL(3) gmm_rows_##in##_##out(                                                         \
      const TI *a, const TI *b, const int32_t *offs, const float *bias, TO *c, int64_t R,     \
      int64_t N, int64_t K, int64_t G, int64_t sa_r, int64_t sa_k, int64_t sb_g,              \
      int64_t sb_k, int64_t sb_n, int64_t bias_sg, int64_t bias_sm, int64_t bias_sn,         \
      int64_t so_r, int64_t so_n) {                                                           \
    xv::gemm::rows_body<TI, TO>(a, b, offs, bias, c, R, N, K, G, sa_r, sa_k, sb_g, sb_k,      \
                                sb_n, bias_sg, bias_sm, bias_sn, so_r, so_n);                 \
  }                                                                                           \
  XV_KERNEL(3) gmm_batch_##in##_##out(                                                        \
      const TI *a, const TI *b, const int32_t *offs, const float *bias, TO *c, int64_t M,     \
      int64_t N, int64_t K, int64_t sa_g, int64_t sa_m, int64_t sa_k, int64_t sb_g,           \
      int64_t sb_k, int64_t sb_n) {                                                           \
    xv::gemm::batch_body<TI, TO>(a, b, offs, bias, c, M, N, K, sa_g, sa_m, sa_k, sb_g, sb_k,  \
                                 sb_n);                                                       \
  }
XV_FOR_EACH_IN_OUT(XV_GMM_KERNELS)
