// topk: the k largest (or smallest) entries of each row, sorted, with int64 indices.
//
// CUDA -> SYCL, as ported here:
//   __global__ void topk(...)                 -> XV_KERNEL(1) void topk_<t>(...)
//   blockIdx.x (row), threadIdx.x, blockDim.x -> it.get_group(0), it.get_local_id(0),
//                                                it.get_local_range(0)
//   isnan, __half2float                       -> a bit test on the fp32 value, xv::to_f32
//
// Rank selection: the rank of x[i] in the row is the number of entries that come before it
// in the output order (greater for largest, smaller otherwise; ties broken by the lower
// index, and NaN counted as the greatest value, as torch.topk does). Entries with rank < k
// are written straight to slot `rank`, so the result comes out sorted without a sort pass
// and without synchronisation: every slot is written by exactly one work-item. The cost is
// O(n^2 / work-group) per row: right for the MoE router's rows (n = experts, 8-512) and
// vocabulary-sized rows of a few thousand; very long rows want a radix select (not here).
#include "xv_kernel_common.h"

namespace xv::topk {

inline bool is_nan(float v) { return (sycl::bit_cast<uint32_t>(v) & 0x7fffffffu) > 0x7f800000u; }

// True when a comes strictly before b in the output order (NaN is the greatest value).
inline bool before(float a, float b, bool largest) {
  const bool na = is_nan(a), nb = is_nan(b);
  if (largest) return na ? !nb : (!nb && a > b);
  return nb ? !na : (!na && a < b);
}

template <class T>
inline void body(const T *x, T *values, int64_t *indices, int64_t n, int64_t k, int32_t largest) {
  sycl::nd_item<1> it = item1();
  const int64_t row = static_cast<int64_t>(it.get_group(0));
  const int64_t threads = static_cast<int64_t>(it.get_local_range(0));
  const T *xr = x + row * n;
  for (int64_t i = static_cast<int64_t>(it.get_local_id(0)); i < n; i += threads) {
    const float v = to_f32(xr[i]);
    int64_t rank = 0;
    for (int64_t j = 0; j < n && rank < k; ++j) {
      const float u = to_f32(xr[j]);
      // u precedes v if it is strictly before it, or equivalent and at a lower index.
      rank += before(u, v, largest) || (j < i && !before(v, u, largest)) ? 1 : 0;
    }
    if (rank < k) {
      values[row * k + rank] = xr[i];
      indices[row * k + rank] = i;
    }
  }
}

}  // namespace xv::topk

#define XV_TOPK_KERNEL(name, T)                                                          \
  XV_KERNEL(1) topk_##name(const T *x, T *values, int64_t *indices, int64_t n, int64_t k, \
                           int32_t largest) {                                            \
    xv::topk::body<T>(x, values, indices, n, k, largest);                                \
  }
XV_FOR_EACH_TYPE(XV_TOPK_KERNEL)
