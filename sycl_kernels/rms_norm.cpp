// rms_norm: y = x * rsqrt(mean(x^2) + eps) * weight, one row per work-group, fp32 math.
//
// CUDA -> SYCL, as ported here:
//   __global__ void rms_norm(...)               -> XV_KERNEL(1) void rms_norm_<t>(...)
//   blockIdx.x (row), threadIdx.x, blockDim.x   -> it.get_group(0), it.get_local_id(0),
//                                                  it.get_local_range(0)
//   warp reduce: v += __shfl_xor_sync(~0, v, o) -> sycl::reduce_over_group(sub_group, v, plus)
//   lane = threadIdx.x % 32, warp = / 32        -> sg.get_local_linear_id(), sg.get_group_linear_id()
//                                                  (the sub-group size is the device's: 16 on
//                                                  the CPU device's AVX-512 path, 16/32 on PVC)
//   __shared__ float partial[32]                -> static work_group_static<float[MAX_SUB_GROUPS]>
//   __syncthreads()                             -> sycl::group_barrier(it.get_group())
//   rsqrtf                                      -> sycl::rsqrt
//
// Two-level reduction: each work-item sums the squares of its strided elements, each
// sub-group reduces with a sub-group collective, sub-group 0 combines the partials.
// weight is fp32 (the host converts it once) or nullptr; rows are contiguous, length D.
#include "xv_kernel_common.h"

#include <sycl/group_algorithm.hpp>
#include <sycl/builtins.hpp>

namespace xv::rms {

constexpr int MAX_SUB_GROUPS = 64;

template <class T>
inline void body(const T *x, const float *weight, T *y, int64_t D, float eps) {
  static syclex::work_group_static<float[MAX_SUB_GROUPS]> partial;
  static syclex::work_group_static<float> inv_rms;
  sycl::nd_item<1> it = item1();
  sycl::sub_group sg = it.get_sub_group();
  const int64_t row = static_cast<int64_t>(it.get_group(0));
  const int64_t lid = static_cast<int64_t>(it.get_local_id(0));
  const int64_t threads = static_cast<int64_t>(it.get_local_range(0));
  const T *xr = x + row * D;
  T *yr = y + row * D;

  float ss = 0.0f;
  for (int64_t i = lid; i < D; i += threads) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
  ss = sycl::reduce_over_group(sg, ss, sycl::plus<float>());
  if (sg.leader()) partial[sg.get_group_linear_id()] = ss;
  sycl::group_barrier(it.get_group());
  if (sg.get_group_linear_id() == 0) {
    const uint32_t n_sg = sg.get_group_linear_range();
    float v = 0.0f;
    for (uint32_t s = sg.get_local_linear_id(); s < n_sg; s += sg.get_local_linear_range())
      v += partial[s];
    v = sycl::reduce_over_group(sg, v, sycl::plus<float>());
    if (sg.leader()) inv_rms = sycl::rsqrt(v / static_cast<float>(D) + eps);
  }
  sycl::group_barrier(it.get_group());
  const float r = inv_rms;
  for (int64_t i = lid; i < D; i += threads) {
    float v = to_f32(xr[i]) * r;
    if (weight) v *= weight[i];
    yr[i] = from_f32<T>(v);
  }
}

}  // namespace xv::rms

#define XV_RMS_KERNEL(name, T)                                                         \
  XV_KERNEL(1) rms_norm_##name(const T *x, const float *weight, T *y, int64_t D, float eps) { \
    xv::rms::body<T>(x, weight, y, D, eps);                                            \
  }
XV_FOR_EACH_TYPE(XV_RMS_KERNEL)
