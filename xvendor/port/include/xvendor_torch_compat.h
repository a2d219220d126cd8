// xvendor_torch_compat.h: the at:: / c10:: / torch:: names that kernels of PyTorch CUDA
// extensions use in device code, on top of xvendor_cuda_compat.h.
//
//   at::PackedTensorAccessor32/64<T, N, Traits>, at::GenericPackedTensorAccessor,
//   at::PackedTensorAccessor (the older name), at::TensorAccessor
//                                  -> the same layout and indexing as ATen's
//                                     (TensorAccessor.h): data pointer, sizes[N], strides[N]
//                                     of index_t; a[i][j] follows strides; size(i), stride(i)
//   at::RestrictPtrTraits, at::DefaultPtrTraits
//   at::Half / c10::Half           -> ATen's own 16-bit type (NOTE [c10::Half]): bits in `x`
//   at::BFloat16 / c10::BFloat16   -> __nv_bfloat16 (16-bit storage, RNE)
//   at::acc_type<T, true>, at::opmath_type<T>
//                                  -> float for 16-bit and float, double for double, as ATen's
//   at::cuda::detail::TensorInfo<T, IndexType>, IndexToOffset<T, IndexType, Dims>
//                                  -> ATen's layout (data, sizes[25], strides[25], dims)
//   C10_HOST_DEVICE, C10_DEVICE, C10_LAUNCH_BOUNDS_*, C10_WARP_SIZE, CUDA_KERNEL_ASSERT
//
// The launch (xvendor.port.launch, kind "accessor") builds the accessor from a torch tensor
// with the same layout: a device pointer, then N sizes, then N strides (elements).
// Written here because ATen's headers are host C++ that SYCL run-time compilation does not
// see; only their device-side value types are needed.
#pragma once

#include "xvendor_cuda_compat.h"

#define C10_HOST_DEVICE
#define C10_DEVICE
#define C10_HOST
#define C10_ALWAYS_INLINE inline __attribute__((always_inline))
#define C10_LAUNCH_BOUNDS_0
#define C10_LAUNCH_BOUNDS_1(x)
#define C10_LAUNCH_BOUNDS_2(x, y)
#define C10_WARP_SIZE 32
#define C10_RESTRICT __restrict
#define C10_UNUSED
// a failed device assertion aborts the kernel in CUDA; here the work-item stops
#define CUDA_KERNEL_ASSERT(cond) \
  do {                           \
    if (!(cond)) __trap();       \
  } while (0)

// NOTE [c10::Half]: ATen's Half is its own type, not CUDA's __half (c10/util/Half.h): the
// 16 bits in a public `x` (extensions read and write them: CAS loops on 16-bit halves of a
// word), implicit conversions from float and __half and to float and __half, arithmetic
// through float with ATen's result types (Half op Half -> Half, Half op float -> float,
// Half op double -> double, Half op int -> Half), comparisons through float, and
// std::numeric_limits. AT_DISPATCH binds scalar_t to it, as ATen does, so overloads taking
// at::Half (and explicit specializations for it) are the ones the kernels call. Values are
// rounded to nearest-even as sycl::half does.
namespace c10 {
struct alignas(2) Half {
  unsigned short x;
  struct from_bits_t {};
  static constexpr from_bits_t from_bits() { return from_bits_t(); }
  Half() = default;
  constexpr Half(unsigned short bits, from_bits_t) : x(bits) {}
  Half(float v) : x(sycl::bit_cast<unsigned short>(sycl::half(v))) {}
  Half(const sycl::half &h) : x(sycl::bit_cast<unsigned short>(h)) {}
  operator float() const { return float(sycl::bit_cast<sycl::half>(x)); }
  operator sycl::half() const { return sycl::bit_cast<sycl::half>(x); }
};
#define XVC_C10_HALF_OPS(op)                                                                   \
  inline Half operator op(const Half &a, const Half &b) { return Half(float(a) op float(b)); } \
  inline float operator op(const Half &a, float b) { return float(a) op b; }                  \
  inline float operator op(float a, const Half &b) { return a op float(b); }                  \
  inline double operator op(const Half &a, double b) { return double(float(a)) op b; }        \
  inline double operator op(double a, const Half &b) { return a op double(float(b)); }        \
  inline Half operator op(const Half &a, int b) { return a op Half(float(b)); }               \
  inline Half operator op(int a, const Half &b) { return Half(float(a)) op b; }               \
  inline Half operator op(const Half &a, long long b) { return a op Half(float(b)); }         \
  inline Half operator op(long long a, const Half &b) { return Half(float(a)) op b; }         \
  inline Half operator op(const Half &a, long b) { return a op Half(float(b)); }              \
  inline Half operator op(long a, const Half &b) { return Half(float(a)) op b; }              \
  inline Half &operator op##=(Half &a, const Half &b) { return a = a op b; }                  \
  inline Half &operator op##=(Half &a, float b) { return a = Half(float(a) op b); }           \
  inline float &operator op##=(float &a, const Half &b) { return a = a op float(b); }
XVC_C10_HALF_OPS(+) XVC_C10_HALF_OPS(-) XVC_C10_HALF_OPS(*) XVC_C10_HALF_OPS(/)
#undef XVC_C10_HALF_OPS
inline Half operator-(const Half &a) { return Half(-float(a)); }
using BFloat16 = __nv_bfloat16;
}  // namespace c10
namespace std {
template <> class numeric_limits<c10::Half> {
 public:
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false,
                        is_exact = false, has_infinity = true, has_quiet_NaN = true,
                        has_signaling_NaN = true, is_iec559 = true, is_bounded = true;
  static constexpr int digits = 11, digits10 = 3, max_digits10 = 5, radix = 2,
                       min_exponent = -13, min_exponent10 = -4, max_exponent = 16,
                       max_exponent10 = 4;
  static constexpr auto round_style = std::round_to_nearest;
  static constexpr c10::Half min() { return c10::Half(0x0400, c10::Half::from_bits()); }
  static constexpr c10::Half lowest() { return c10::Half(0xFBFF, c10::Half::from_bits()); }
  static constexpr c10::Half max() { return c10::Half(0x7BFF, c10::Half::from_bits()); }
  static constexpr c10::Half epsilon() { return c10::Half(0x1400, c10::Half::from_bits()); }
  static constexpr c10::Half round_error() { return c10::Half(0x3800, c10::Half::from_bits()); }
  static constexpr c10::Half infinity() { return c10::Half(0x7C00, c10::Half::from_bits()); }
  static constexpr c10::Half quiet_NaN() { return c10::Half(0x7E00, c10::Half::from_bits()); }
  static constexpr c10::Half signaling_NaN() { return c10::Half(0x7D00, c10::Half::from_bits()); }
  static constexpr c10::Half denorm_min() { return c10::Half(0x0001, c10::Half::from_bits()); }
};
}  // namespace std
// atomics on ATen's Half: CUDA's __half ones on the same bits
inline c10::Half atomicAdd(c10::Half *p, c10::Half v) {
  return c10::Half(atomicAdd(reinterpret_cast<__half *>(p), sycl::half(v)));
}

namespace at {
using c10::BFloat16;
using c10::Half;

template <typename T> struct DefaultPtrTraits { typedef T *PtrType; };
template <typename T> struct RestrictPtrTraits { typedef T *__restrict PtrType; };

template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = int64_t>
class TensorAccessorBase {
 public:
  typedef typename PtrTraits<T>::PtrType PtrType;
  TensorAccessorBase(PtrType data, const index_t *sizes, const index_t *strides)
      : data_(data), sizes_(sizes), strides_(strides) {}
  index_t stride(index_t i) const { return strides_[i]; }
  index_t size(index_t i) const { return sizes_[i]; }
  PtrType data() { return data_; }
  const PtrType data() const { return data_; }

 protected:
  PtrType data_;
  const index_t *sizes_;
  const index_t *strides_;
};

template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = int64_t>
class TensorAccessor : public TensorAccessorBase<T, N, PtrTraits, index_t> {
 public:
  typedef typename PtrTraits<T>::PtrType PtrType;
  using TensorAccessorBase<T, N, PtrTraits, index_t>::TensorAccessorBase;
  TensorAccessor<T, N - 1, PtrTraits, index_t> operator[](index_t i) {
    return TensorAccessor<T, N - 1, PtrTraits, index_t>(this->data_ + this->strides_[0] * i,
                                                         this->sizes_ + 1, this->strides_ + 1);
  }
  const TensorAccessor<T, N - 1, PtrTraits, index_t> operator[](index_t i) const {
    return TensorAccessor<T, N - 1, PtrTraits, index_t>(this->data_ + this->strides_[0] * i,
                                                         this->sizes_ + 1, this->strides_ + 1);
  }
};

template <typename T, template <typename U> class PtrTraits, typename index_t>
class TensorAccessor<T, 1, PtrTraits, index_t> : public TensorAccessorBase<T, 1, PtrTraits, index_t> {
 public:
  using TensorAccessorBase<T, 1, PtrTraits, index_t>::TensorAccessorBase;
  T &operator[](index_t i) { return this->data_[this->strides_[0] * i]; }
  const T &operator[](index_t i) const { return this->data_[this->strides_[0] * i]; }
};

// The by-value kernel argument: its bytes are built by the launch (NOTE [accessor arguments]
// in launch.py): data pointer, sizes[N], strides[N].
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = int64_t>
class GenericPackedTensorAccessorBase {
 public:
  typedef typename PtrTraits<T>::PtrType PtrType;
  index_t stride(index_t i) const { return strides_[i]; }
  index_t size(index_t i) const { return sizes_[i]; }
  PtrType data() { return data_; }
  const PtrType data() const { return data_; }

 protected:
  PtrType data_;
  index_t sizes_[N];
  index_t strides_[N];
};

template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = int64_t>
class GenericPackedTensorAccessor : public GenericPackedTensorAccessorBase<T, N, PtrTraits, index_t> {
 public:
  typedef typename PtrTraits<T>::PtrType PtrType;
  TensorAccessor<T, N - 1, PtrTraits, index_t> operator[](index_t i) {
    return TensorAccessor<T, N - 1, PtrTraits, index_t>(this->data_ + this->strides_[0] * i,
                                                         this->sizes_ + 1, this->strides_ + 1);
  }
  const TensorAccessor<T, N - 1, PtrTraits, index_t> operator[](index_t i) const {
    return TensorAccessor<T, N - 1, PtrTraits, index_t>(this->data_ + this->strides_[0] * i,
                                                         this->sizes_ + 1, this->strides_ + 1);
  }
};

template <typename T, template <typename U> class PtrTraits, typename index_t>
class GenericPackedTensorAccessor<T, 1, PtrTraits, index_t>
    : public GenericPackedTensorAccessorBase<T, 1, PtrTraits, index_t> {
 public:
  T &operator[](index_t i) { return this->data_[this->strides_[0] * i]; }
  const T &operator[](index_t i) const { return this->data_[this->strides_[0] * i]; }
};

template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
using PackedTensorAccessor32 = GenericPackedTensorAccessor<T, N, PtrTraits, int32_t>;
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
using PackedTensorAccessor64 = GenericPackedTensorAccessor<T, N, PtrTraits, int64_t>;
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = int64_t>
using PackedTensorAccessor = GenericPackedTensorAccessor<T, N, PtrTraits, index_t>;

// ATen's accumulation types on CUDA (ATen/AccumulateType.h): 16-bit floats and float
// accumulate in float, double in double, integers in int64.
template <typename T, bool is_cuda = true> struct AccumulateType { using type = T; };
template <bool c> struct AccumulateType<__half, c> { using type = float; };
template <bool c> struct AccumulateType<__nv_bfloat16, c> { using type = float; };
template <bool c> struct AccumulateType<float, c> { using type = float; };
template <bool c> struct AccumulateType<double, c> { using type = double; };
template <bool c> struct AccumulateType<int, c> { using type = int64_t; };
template <bool c> struct AccumulateType<int64_t, c> { using type = int64_t; };
template <typename T, bool is_cuda = true> using acc_type = typename AccumulateType<T, is_cuda>::type;
template <typename T> using opmath_type = acc_type<T, true>;

// ATen's TensorInfo (ATen/cuda/detail/TensorInfo.cuh), which extensions pass to kernels by
// value: a data pointer, sizes and strides of up to MAX_TENSORINFO_DIMS dimensions (elements),
// the number of dimensions; IndexToOffset maps a linear index of the (row-major) logical
// shape to the element offset through the strides.
#ifndef MAX_TENSORINFO_DIMS
#define MAX_TENSORINFO_DIMS 25
#endif
namespace cuda {
namespace detail {
template <typename T, typename IndexType> struct TensorInfo {
  T *data;
  IndexType sizes[MAX_TENSORINFO_DIMS];
  IndexType strides[MAX_TENSORINFO_DIMS];
  int dims;
  bool isContiguous() const { return dims == 1 && strides[0] == 1; }
};
template <typename T, typename IndexType, int Dims> struct IndexToOffset {
  static IndexType get(IndexType linearId, const TensorInfo<T, IndexType> &info) {
    IndexType offset = 0;
    for (int i = (Dims > 0 ? Dims : info.dims) - 1; i > 0; --i) {
      IndexType cur = linearId % info.sizes[i];
      linearId /= info.sizes[i];
      offset += cur * info.strides[i];
    }
    return offset + linearId * info.strides[0];
  }
};
}  // namespace detail
}  // namespace cuda
}  // namespace at

namespace torch {
using namespace at;
}  // namespace torch

// thrust's value types, which extensions use in device code (thrust::tuple / get): the
// std ones (header-only, usable in SYCL device code); thrust's algorithms stay refused.
#include <tuple>
#include <utility>
namespace thrust {
using std::get;
using std::make_pair;
using std::make_tuple;
using std::pair;
using std::tie;
using std::tuple;
}  // namespace thrust
