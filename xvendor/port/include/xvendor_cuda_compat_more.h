// xvendor_cuda_compat_more.h: device printf and the clock counters, included after
// xvendor_cuda_compat.h by every port translation.
//
//   printf(FMT, ...)   -> sycl::ext::oneapi::experimental::printf with FMT in the constant
//                         address space (OpenCL's printf contract; FMT must be a string
//                         literal, as nvcc requires it to be for checking), float arguments
//                         promoted to double as C's varargs do (CUDA's printf is variadic)
//   clock() / clock64() -> sycl_ext_oneapi_clock's sub-group clock: like CUDA's per-SM
//                         counter, only differences taken on one thread are meaningful
#pragma once

#include <sycl/ext/oneapi/experimental/builtins.hpp>
#include <sycl/ext/oneapi/experimental/clock.hpp>

// _block / _system scopes: device scope is at least as strong as either on one
// device; defined after every overload of the compat header (mixed argument types)
#define XVC_SCOPED(op) \
  template <class T, class... A> inline auto op##_block(T *p, A... a) { return op(p, a...); } \
  template <class T, class... A> inline auto op##_system(T *p, A... a) { return op(p, a...); }
XVC_SCOPED(atomicAdd) XVC_SCOPED(atomicSub) XVC_SCOPED(atomicMax) XVC_SCOPED(atomicMin)
XVC_SCOPED(atomicExch) XVC_SCOPED(atomicCAS) XVC_SCOPED(atomicAnd) XVC_SCOPED(atomicOr)
XVC_SCOPED(atomicXor) XVC_SCOPED(atomicInc) XVC_SCOPED(atomicDec)
#undef XVC_SCOPED

namespace xvc {
template <class T> inline auto printf_arg(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<double>(v);
  } else if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(int)) {
    return static_cast<int>(v);
  } else {
    return v;
  }
}
template <class F, class... A> inline int device_printf(const F *fmt, A... a) {
  return sycl::ext::oneapi::experimental::printf(fmt, printf_arg(a)...);
}
inline unsigned long long clock64_() {
  namespace ex = sycl::ext::oneapi::experimental;
  return ex::clock<ex::clock_scope::sub_group>();
}
}  // namespace xvc

#define printf(FMT, ...)                                                                     \
  ([&]() {                                                                                   \
    static const __attribute__((opencl_constant)) char xv_printf_fmt_[] = FMT;               \
    return ::xvc::device_printf(xv_printf_fmt_, ##__VA_ARGS__);                              \
  }())
#define clock() (static_cast<long>(::xvc::clock64_()))
#define clock64() (static_cast<long long>(::xvc::clock64_()))
