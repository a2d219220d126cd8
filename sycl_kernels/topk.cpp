// topk: the k largest (or smallest) entries of each row, sorted, with int64 indices.
//
// CUDA -> SYCL, as ported here:
//   __global__ void topk(...)                 -> XV_KERNEL(1) void topk_<t>(...)
//   blockIdx.x (row), threadIdx.x, blockDim.x -> it.get_group(0), it.get_local_id(0),
//                                                it.get_local_range(0)
//   __shared__ unsigned hist[256]             -> static work_group_static<uint32_t[256]>
//   atomicAdd(&hist[d], 1)                    -> sycl::atomic_ref<uint32_t, relaxed, work_group,
//                                                local_space>(hist[d]).fetch_add(1)
//   cub::BlockScan<...>::ExclusiveSum         -> sycl::exclusive_scan_over_group(group, v, plus)
//   __syncthreads()                           -> sycl::group_barrier(it.get_group())
//   __float_as_uint, __half_as_ushort         -> sycl::bit_cast (bf16: its storage bits)
//
// Output order, exactly torch.topk's: largest first (smallest first for largest=0); NaN is
// the greatest value (first when largest, last otherwise); -0.0 equals +0.0; equal values
// come out lowest index first (torch leaves the order of ties open, this kernel pins it, so
// results are deterministic). Values are copied from the input, NaN payloads included.
//
// One row per work-group, any work-group size:
// 1. Every value maps to an unsigned key q of B bits (32 for fp32, 16 for fp16/bf16) with
//    q(a) < q(b) exactly when a comes before b in the output order (every NaN shares one
//    key, -0 shares +0's, so both tie by index).
// 2. Radix select, 8 bits per pass from the top: a histogram (work-group local memory) of the
//    next digit of q among the entries that still match the digits chosen so far; a group
//    scan over the bins finds the digit that holds the k-th entry. A pass whose chosen bin is
//    taken whole ends the search early (k = n ends after one pass). At most B/8 passes.
// 3. Gather: entries whose chosen digits are smaller all win; entries equal on them fill the
//    remaining slots in index order (each work-item owns a contiguous chunk of the row, an
//    exclusive scan of the per-chunk counts places them), which is the lowest-index tie rule.
//    Winners are written as (q << 32 | index) into the row's int64 indices output: unique
//    keys whose ascending order is the output order, so no scratch memory is needed.
// 4. Sort the k keys in place with a bitonic network in the form where every comparator puts
//    the smaller key in the lower slot; slots k..2^ceil(log2 k) then act as +inf padding that
//    no comparator moves, and comparators reaching them are skipped.
// 5. Decode: index = low 32 bits, value = x[index].
// Cost per row: O(n * B/8) + O(n) + O(k log^2 k) operations shared by the work-group; no
// n^2 or n*k term. Rows must be shorter than 2^31 entries (the host checks). k >= 1: the host
// launches nothing for k = 0.
#include "xv_kernel_common.h"

#include <sycl/atomic_ref.hpp>
#include <sycl/group_algorithm.hpp>

namespace xv::topk {

constexpr uint32_t BINS = 256;  // one 8-bit digit per pass

// The order-preserving key of a BITS-wide IEEE value from its bits; inf is the bit pattern
// of +infinity. NaN (any sign or payload) maps to the largest key, -0 to +0's.
template <int BITS>
inline uint32_t ordered(uint32_t u, uint32_t inf) {
  constexpr uint32_t sign = 1u << (BITS - 1);
  constexpr uint32_t all = BITS == 32 ? ~0u : (1u << BITS) - 1u;
  const uint32_t mag = u & (sign - 1u);
  if (mag > inf) return all;
  if (mag == 0) return sign;
  return (u & sign) ? (~u & all) : (u | sign);
}

inline uint32_t lesser(uint32_t a, uint32_t b) { return a < b ? a : b; }

template <class T> struct Key;
template <> struct Key<float> {
  static constexpr int BITS = 32;
  static uint32_t of(float v) { return ordered<32>(sycl::bit_cast<uint32_t>(v), 0x7f800000u); }
};
template <> struct Key<sycl::half> {
  static constexpr int BITS = 16;
  static uint32_t of(sycl::half v) { return ordered<16>(sycl::bit_cast<uint16_t>(v), 0x7c00u); }
};
template <> struct Key<bf16> {
  static constexpr int BITS = 16;
  static uint32_t of(bf16 v) { return ordered<16>(v.bits, 0x7f80u); }
};

using LocalCount = sycl::atomic_ref<uint32_t, sycl::memory_order::relaxed,
                                    sycl::memory_scope::work_group,
                                    sycl::access::address_space::local_space>;

template <class T>
inline void body(const T *x, T *values, int64_t *indices, int64_t n64, int64_t k64,
                 int32_t largest) {
  static syclex::work_group_static<uint32_t[BINS]> hist_storage;
  static syclex::work_group_static<uint32_t[3]> chosen_storage;  // prefix, want, done
  uint32_t(&hist)[BINS] = hist_storage;
  uint32_t(&chosen)[3] = chosen_storage;
  sycl::nd_item<1> it = item1();
  const sycl::group<1> g = it.get_group();
  const uint32_t lid = static_cast<uint32_t>(it.get_local_id(0));
  const uint32_t threads = static_cast<uint32_t>(it.get_local_range(0));
  const int64_t row = static_cast<int64_t>(it.get_group(0));
  const uint32_t n = static_cast<uint32_t>(n64), k = static_cast<uint32_t>(k64);
  const T *xr = x + row * n64;
  T *vr = values + row * k64;
  int64_t *ir = indices + row * k64;
  uint64_t *keys = reinterpret_cast<uint64_t *>(ir);  // step 3's winners, sorted in place
  constexpr int B = Key<T>::BITS;
  // largest: the greatest key first, so flip every bit; NaN's all-ones key becomes 0.
  const uint32_t flip = largest ? (B == 32 ? ~0u : (1u << B) - 1u) : 0u;

  // Step 2. Invariant: `want` entries are still to be chosen among those with
  // (q & mask) == prefix; the k - want entries with (q & mask) < prefix are chosen already.
  uint32_t prefix = 0, mask = 0, want = k;
  const uint32_t per = (BINS + threads - 1) / threads;  // bins owned by a work-item in the scan
  for (int shift = B - 8; shift >= 0; shift -= 8) {
    for (uint32_t b = lid; b < BINS; b += threads) hist[b] = 0;
    sycl::group_barrier(g);
    for (uint32_t i = lid; i < n; i += threads) {
      const uint32_t q = Key<T>::of(xr[i]) ^ flip;
      if ((q & mask) == prefix) LocalCount(hist[(q >> shift) & (BINS - 1)]).fetch_add(1u);
    }
    sycl::group_barrier(g);
    const uint32_t b0 = lesser(lid * per, BINS), b1 = lesser(b0 + per, BINS);
    uint32_t mine = 0;
    for (uint32_t b = b0; b < b1; ++b) mine += hist[b];
    uint32_t before = sycl::exclusive_scan_over_group(g, mine, sycl::plus<uint32_t>());
    if (before < want && want <= before + mine) {  // exactly one work-item holds the k-th
      uint32_t b = b0;
      while (before + hist[b] < want) before += hist[b++];
      chosen[0] = prefix | (b << shift);
      chosen[1] = want - before;
      chosen[2] = hist[b] == want - before;
    }
    sycl::group_barrier(g);
    prefix = chosen[0];
    want = chosen[1];
    mask |= (BINS - 1) << shift;
    if (chosen[2]) break;  // the same value in every work-item: a uniform exit
  }

  // Step 3.
  const uint32_t chunk = (n + threads - 1) / threads;
  const uint32_t lo = lesser(lid * chunk, n), hi = lesser(lo + chunk, n);
  uint32_t wins = 0, ties = 0;
  for (uint32_t i = lo; i < hi; ++i) {
    const uint32_t m = (Key<T>::of(xr[i]) ^ flip) & mask;
    wins += m < prefix;
    ties += m == prefix;
  }
  uint32_t w = sycl::exclusive_scan_over_group(g, wins, sycl::plus<uint32_t>());
  uint32_t t = sycl::exclusive_scan_over_group(g, ties, sycl::plus<uint32_t>());
  const uint32_t first_tie = k - want;
  for (uint32_t i = lo; i < hi && (wins || t < want); ++i) {
    const uint32_t q = Key<T>::of(xr[i]) ^ flip;
    const uint64_t key = (static_cast<uint64_t>(q) << 32) | i;
    if ((q & mask) < prefix) {
      keys[w++] = key;
      --wins;
    } else if ((q & mask) == prefix) {
      if (t < want) keys[first_tie + t] = key;
      ++t;
    }
  }
  sycl::group_barrier(g);

  // Step 4.
  uint32_t span = 1;
  while (span < k) span <<= 1;
  for (uint32_t size = 2; size <= span; size <<= 1) {
    for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
      const bool mirror = stride == size >> 1;  // first step of a merge: compare mirrored pairs
      for (uint32_t p = lid; p < span / 2; p += threads) {
        const uint32_t base = (p / stride) * 2 * stride, off = p % stride;
        const uint32_t a = base + off, b = mirror ? base + 2 * stride - 1 - off : a + stride;
        if (b < k) {
          const uint64_t ka = keys[a], kb = keys[b];
          if (kb < ka) {
            keys[a] = kb;
            keys[b] = ka;
          }
        }
      }
      sycl::group_barrier(g);
    }
  }

  // Step 5: every slot is read and rewritten by the same work-item.
  for (uint32_t s = lid; s < k; s += threads) {
    const uint32_t i = static_cast<uint32_t>(keys[s]);
    vr[s] = xr[i];
    ir[s] = static_cast<int64_t>(i);
  }
}

}  // namespace xv::topk

#define XV_TOPK_KERNEL(name, T)                                                          \
  XV_KERNEL(1) topk_##name(const T *x, T *values, int64_t *indices, int64_t n, int64_t k, \
                           int32_t largest) {                                            \
    xv::topk::body<T>(x, values, indices, n, k, largest);                                \
  }
XV_FOR_EACH_TYPE(XV_TOPK_KERNEL)
