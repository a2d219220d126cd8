// Kernels instantiated by file-scope macro uses (NOTE [instantiations through a macro]):
// MAKE_apply(ADD, float) expands to `template __global__ void apply<float, ADD>(...);`.
// block_total uses CUB (refused): its macro-made instantiations must not reach the SYCL
// build, where they would name a kernel that is not there.
#include <cub/cub.cuh>

typedef enum Op_t { ADD = 0, MUL = 1 } Op_t;

template <typename T, int OP>
__global__ void apply(T *x, T v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = OP == ADD ? x[i] + v : x[i] * v;
}

template <typename T, int OP, int BLOCK, int PER_THREAD>
__global__ void apply_tiled(T *x, T v, int n) {
  for (int k = 0; k < PER_THREAD; ++k) {
    int i = (blockIdx.x * BLOCK + threadIdx.x) * PER_THREAD + k;
    if (i < n) x[i] = OP == ADD ? x[i] + v : x[i] * v;
  }
}

template <typename T>
__global__ void block_total(const T *x, T *out) {
  typedef cub::BlockReduce<T, 128> R;
  __shared__ typename R::TempStorage tmp;
  T s = R(tmp).Sum(x[threadIdx.x]);
  if (threadIdx.x == 0) *out = s;
}

#define MAKE_apply(oname, gtype) \
  template __global__ void apply<gtype, oname>(gtype * x, gtype v, int n);
#define MAKE_total(gtype) template __global__ void block_total<gtype>(const gtype *x, gtype *out);
#define MAKE_all(gtype) MAKE_apply(ADD, gtype) MAKE_apply(MUL, gtype) MAKE_total(gtype)

MAKE_apply(MUL, float)
MAKE_all(double)

// a run of uses with no semicolons (NOTE [runs of instantiation macro uses])
#define MAKE_tiled(oname, gtype, block, per) \
  template __global__ void apply_tiled<gtype, oname, block, per>(gtype * x, gtype v, int n);

MAKE_tiled(ADD, float, 64, 2)
MAKE_tiled(MUL, float, 64, 2)
MAKE_tiled(ADD, double, 64, 2)
MAKE_tiled(MUL, double, 64, 2)
MAKE_tiled(ADD, float, 128, 1)
MAKE_tiled(MUL, float, 128, 1)
