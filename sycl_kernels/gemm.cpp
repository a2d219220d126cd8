// gemm: out = a @ b (+ bias), fp32 accumulation, any input strides, out_dtype epilogue.
//
// CUDA -> SYCL, as ported here:
//   __global__ void gemm(...)                -> XV_KERNEL(3) void gemm_<in>_<out>(...): a free
//                                               function at namespace scope, nd_range_kernel<3>
//   dim3 grid(nN, nM), block(16, 16)         -> nd_range<3>({1, nM*WM, nN*WN}, {1, WM, WN}),
//                                               set up by the host (xvendor/xpu/backend.py)
//   blockIdx.y * blockDim.y + threadIdx.y    -> it.get_group(1), it.get_local_id(1) with
//                                               it = this_work_item::get_nd_item<3>()
//   __shared__ float As[..], Bs[..]          -> static syclex::work_group_static<float[..]>
//   __syncthreads()                          -> sycl::group_barrier(it.get_group())
//   template<typename T> __global__          -> a template body stamped into one extern "C"
//                                               kernel per (input, output) dtype pair, found
//                                               by name after run-time compilation
//
// Grid: dimension 0 has size 1 (grouped_mm.cpp puts groups there); dimensions 1, 2 are the
// tiles of M and N.
// bias is fp32 (the host converts the N values), indexed bias[n].
#include "gemm_tile.h"

namespace xv::gemm {

template <class TI, class TO>
inline void gemm_body(const TI *a, const TI *b, const float *bias, TO *out, int64_t M,
                      int64_t N, int64_t K, int64_t sa_m, int64_t sa_k, int64_t sb_k,
                      int64_t sb_n) {
  static syclex::work_group_static<ATile> As;
  static syclex::work_group_static<BTile> Bs;
  sycl::nd_item<3> it = item3();
  const int64_t m0 = static_cast<int64_t>(it.get_group(1)) * BM;
  const int64_t n0 = static_cast<int64_t>(it.get_group(2)) * BN;
  tile<TI, TO>(it, As, Bs, Mat<TI>{a, sa_m, sa_k}, Mat<TI>{b, sb_k, sb_n}, 0, K, m0, M, n0, N,
               bias, 0, 1, out, N, 1);
}

}  // namespace xv::gemm

#define XV_GEMM_KERNEL(in, out, TI, TO)                                                  \
  XV_KERNEL(3) gemm_##in##_##out(const TI *a, const TI *b, const float *bias, TO *c,      \
                                 int64_t M, int64_t N, int64_t K, int64_t sa_m,           \
                                 int64_t sa_k, int64_t sb_k, int64_t sb_n) {              \
    xv::gemm::gemm_body<TI, TO>(a, b, bias, c, M, N, K, sa_m, sa_k, sb_k, sb_n);          \
  }
XV_FOR_EACH_IN_OUT(XV_GEMM_KERNEL)
