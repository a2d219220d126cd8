// One output tile of C = A @ B (+ bias): the register-tiled core of gemm.cpp and
// grouped_mm.cpp.
//
// CUDA -> SYCL in this header:
//   threadIdx.x / threadIdx.y           -> it.get_local_id(2) / it.get_local_id(1)
//   __shared__ float As[BM][BK]         -> static syclex::work_group_static<float[BM][BK]>,
//                                          declared in the kernel, passed here by reference
//   __syncthreads()                     -> sycl::group_barrier(it.get_group())
//   per-thread float acc[RM][RN]        -> the same: a private array kept in registers
//
// Work-group: WM x WN work-items, each computing RM x RN outputs, so one work-group owns
// a BM x BN = (WM*RM) x (WN*RN) tile. Columns are interleaved across work-items
// (n = tx + j*WN): neighbouring work-items touch neighbouring columns, which is what both
// the CPU device's vectorizer (work-items along dimension 2 become SIMD lanes) and a GPU
// sub-group want; A values are uniform across a row of work-items (a broadcast).
// The work-group shape matters ~18x on the CPU device (8x8 -> 16x16 work-groups, 1024^3
// fp32, measured on a 2-core machine); WN = 16 matches
// AVX-512 and PVC's sub-group of 16. Swept on the OpenCL CPU device (2-core AVX-512,
// 1024^3 fp32, on a shared machine): RM x RN = 4x4 with BK = 64 was the best of 4..7 x 4
// and BK 16..64; the inner loop compiles to 16 zmm FMAs per 4 broadcasts + 4 vector loads
// (figures: bench/RESULTS.md).
// Mapping tile loads onto lanes (below) instead of a flat index with / and % turned
// gathers/scatters into vector loads and doubled the throughput.
#pragma once

#include "xv_kernel_common.h"

namespace xv::gemm {

#ifndef XV_GEMM_WM
#define XV_GEMM_WM 16
#endif
#ifndef XV_GEMM_WN
#define XV_GEMM_WN 16
#endif
#ifndef XV_GEMM_RM
#define XV_GEMM_RM 4
#endif
#ifndef XV_GEMM_RN
#define XV_GEMM_RN 4
#endif
#ifndef XV_GEMM_BK
#define XV_GEMM_BK 64
#endif

constexpr int WM = XV_GEMM_WM, WN = XV_GEMM_WN;  // work-items per work-group
constexpr int RM = XV_GEMM_RM, RN = XV_GEMM_RN;  // outputs per work-item
constexpr int BM = WM * RM, BN = WN * RN, BK = XV_GEMM_BK;
static_assert(BM % WM == 0 && BK % WN == 0 && BK % WM == 0 && BN % WN == 0,
              "tile loads map work-items onto whole rows and columns");

using ATile = float[BM][BK];
using BTile = float[BK][BN];

// A view of one operand: element (r, c) is ptr[r * s_row + c * s_col].
template <class T> struct Mat {
  const T *ptr;
  int64_t s_row, s_col;
  float at(int64_t r, int64_t c) const { return to_f32(ptr[r * s_row + c * s_col]); }
};

// Element (r, c), with the unit column stride (row-major: the common case) made visible to
// the compiler so that it emits contiguous vector loads instead of gathers.
template <class T> inline float load(const Mat<T> &x, int64_t r, int64_t c) {
  return x.s_col == 1 ? to_f32(x.ptr[r * x.s_row + c]) : x.at(r, c);
}

// Compute rows [m0, m0 + BM) x cols [n0, n0 + BN) of out = a[:, k0:k1] @ b[k0:k1, :],
// masked to m < m_end and n < n_end; add bias[m * bias_sm + n * bias_sn] when bias is
// non-null; write out[m * so_m + n * so_n]. With k1 <= k0 the tile is bias (or zero) only.
template <class TI, class TO>
__attribute__((always_inline))  // two call sites in grouped_mm.cpp: a call would block
inline void tile(sycl::nd_item<3> it, ATile &As, BTile &Bs,  // the CPU vectorizer (2x slower)
                 Mat<TI> a, Mat<TI> b, int64_t k0, int64_t k1, int64_t m0, int64_t m_end,
                 int64_t n0, int64_t n_end, const float *bias, int64_t bias_sm,
                 int64_t bias_sn, TO *out, int64_t so_m, int64_t so_n) {
  const int ty = static_cast<int>(it.get_local_id(1));
  const int tx = static_cast<int>(it.get_local_id(2));
  float acc[RM][RN];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;

  for (int64_t kt = k0; kt < k1; kt += BK) {
    // Cooperative, zero-padded tile loads. Work-item (ty, tx) loads rows ty + WM*p and
    // columns tx + WN*q, so neighbouring work-items (SIMD lanes on the CPU device) touch
    // neighbouring addresses: unit-stride operands become vector loads, not gathers.
    for (int p = 0; p < BM / WM; ++p)
      for (int q = 0; q < BK / WN; ++q) {
        const int r = ty + WM * p, c = tx + WN * q;
        const int64_t m = m0 + r, k = kt + c;
        As[r][c] = (m < m_end && k < k1) ? load(a, m, k) : 0.0f;
      }
    for (int p = 0; p < BK / WM; ++p)
      for (int q = 0; q < BN / WN; ++q) {
        const int r = ty + WM * p, c = tx + WN * q;
        const int64_t k = kt + r, n = n0 + c;
        Bs[r][c] = (k < k1 && n < n_end) ? load(b, k, n) : 0.0f;
      }
    sycl::group_barrier(it.get_group());
    for (int kk = 0; kk < BK; ++kk) {
      float av[RM], bv[RN];
      for (int i = 0; i < RM; ++i) av[i] = As[ty * RM + i][kk];
      for (int j = 0; j < RN; ++j) bv[j] = Bs[kk][tx + j * WN];
      for (int i = 0; i < RM; ++i)
        for (int j = 0; j < RN; ++j) acc[i][j] += av[i] * bv[j];
    }
    sycl::group_barrier(it.get_group());
  }

  for (int i = 0; i < RM; ++i) {
    const int64_t m = m0 + ty * RM + i;
    if (m >= m_end) continue;
    for (int j = 0; j < RN; ++j) {
      const int64_t n = n0 + tx + j * WN;
      if (n >= n_end) continue;
      float v = acc[i][j];
      if (bias) v += bias[m * bias_sm + n * bias_sn];
      out[m * so_m + n * so_n] = from_f32<TO>(v);
    }
  }
}

}  // namespace xv::gemm
