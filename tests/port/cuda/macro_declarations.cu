// Device types and functions declared by a function-like macro used at file scope
// (NOTE [declarations through a macro]): nothing names them before expansion.
#include <cstdint>

#define DECLARE_COMBINE(NAME, EXPR)                              \
  template <typename T> struct Combine##NAME##Op {               \
    __device__ T operator()(T a, T b) const { return EXPR; }     \
  };                                                             \
  template <typename T> __device__ T combine##NAME(T a, T b) {   \
    return Combine##NAME##Op<T>()(a, b);                         \
  }

#define OP_SCALE 3
DECLARE_COMBINE(Sum, a + b)
#undef OP_SCALE
#define OP_SCALE 3
DECLARE_COMBINE(Scaled, OP_SCALE * a - b)
#undef OP_SCALE
#define OP_SCALE 3

// a macro that uses another macro of the file
#define DECLARE_BOTH(NAME) DECLARE_COMBINE(NAME, a * b)
DECLARE_BOTH(Prod)

__global__ void combine_all(const float *x, const float *y, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = combineSum(x[i], y[i]) + CombineScaledOp<float>()(x[i], y[i]) + combineProd(x[i], y[i]);
}
