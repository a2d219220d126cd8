// Shared by the xvendor free-function SYCL kernels: includes, element types, conversions.
//
// CUDA -> SYCL in this header:
//   __half / __nv_bfloat16          -> sycl::half / xv::bf16 (16-bit storage, fp32 math)
//   __half2float, __float2bfloat16  -> xv::to_f32, xv::from_f32<T> (round to nearest even)
//   __global__ void k(...)          -> XV_KERNEL(N) void k(...): a plain function at namespace
//                                     scope marked as an nd-range kernel (free-function kernel)
//
// Minimal includes on purpose: <sycl/sycl.hpp> costs 2-5 s per run-time compile, these
// headers ~0.4 s (measured on a 2-core machine). The same file builds ahead of time with
// icpx -fsycl.
#pragma once

#include <sycl/bit_cast.hpp>
#include <sycl/ext/oneapi/free_function_queries.hpp>
#include <sycl/ext/oneapi/kernel_properties/properties.hpp>
#include <sycl/ext/oneapi/work_group_static.hpp>
#include <sycl/group_barrier.hpp>
#include <sycl/half_type.hpp>

#include <cstdint>

namespace syclex = sycl::ext::oneapi::experimental;

// A free-function kernel launched over an N-dimensional nd_range. extern "C" keeps the
// name unmangled, so the runtime finds it by its plain name after run-time compilation.
#define XV_KERNEL(N) \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclex::nd_range_kernel<N>)) void

namespace xv {

// bfloat16 as its storage bits: the conversions below are all the kernels need, and they
// avoid the heavier sycl::ext::oneapi::bfloat16 header in every run-time compile.
struct bf16 {
  uint16_t bits;
};

inline float to_f32(float x) { return x; }
inline float to_f32(sycl::half x) { return static_cast<float>(x); }
inline float to_f32(bf16 x) { return sycl::bit_cast<float>(static_cast<uint32_t>(x.bits) << 16); }

template <class T> inline T from_f32(float x);
template <> inline float from_f32<float>(float x) { return x; }
template <> inline sycl::half from_f32<sycl::half>(float x) { return sycl::half(x); }
template <> inline bf16 from_f32<bf16>(float x) {
  uint32_t u = sycl::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return bf16{static_cast<uint16_t>(u >> 16)};
}

inline sycl::nd_item<1> item1() { return sycl::ext::oneapi::this_work_item::get_nd_item<1>(); }
inline sycl::nd_item<2> item2() { return sycl::ext::oneapi::this_work_item::get_nd_item<2>(); }
inline sycl::nd_item<3> item3() { return sycl::ext::oneapi::this_work_item::get_nd_item<3>(); }

}  // namespace xv

// Stamp out one extern "C" kernel per (input, output) element type pair from a template
// body: the runtime selects kernels by name (gemm_f16_bf16 = fp16 in, bf16 out).
#define XV_FOR_EACH_IN_OUT(M)                                                      \
  M(f32, f32, float, float) M(f32, f16, float, sycl::half) M(f32, bf16, float, xv::bf16) \
  M(f16, f32, sycl::half, float) M(f16, f16, sycl::half, sycl::half)              \
  M(f16, bf16, sycl::half, xv::bf16) M(bf16, f32, xv::bf16, float)                \
  M(bf16, f16, xv::bf16, sycl::half) M(bf16, bf16, xv::bf16, xv::bf16)

#define XV_FOR_EACH_TYPE(M) M(f32, float) M(f16, sycl::half) M(bf16, xv::bf16)
