// ATen's Half in device code (NOTE [c10::Half]): AT_DISPATCH binds scalar_t to at::Half, so
// an overload taking at::Half is the one called, and it may work on the raw bits in `.x`
// (a CAS loop on the 32-bit word holding the 16-bit value); numeric_limits and arithmetic.
#include <torch/extension.h>
#include <limits>

__device__ void atomic_add(float *a, float v) { atomicAdd(a, v); }
__device__ void atomic_add(double *a, double v) { atomicAdd(a, v); }
__device__ void atomic_add(at::Half *address, at::Half val) {
  unsigned int *word = (unsigned int *)((char *)address - ((size_t)address & 2));
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    at::Half cur;
    cur.x = (size_t)address & 2 ? (old >> 16) : (old & 0xffff);
    at::Half sum = cur + val;
    old = (size_t)address & 2 ? (old & 0xffff) | ((unsigned int)sum.x << 16)
                              : (old & 0xffff0000) | sum.x;
    old = atomicCAS(word, assumed, old);
  } while (assumed != old);
}

template <typename scalar_t>
__global__ void bin_add(const scalar_t *x, const int64_t *bin, scalar_t *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomic_add(&out[bin[i]], x[i]);
}

template <typename scalar_t>
__global__ void row_max(const scalar_t *x, scalar_t *out, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  scalar_t m = std::numeric_limits<scalar_t>::lowest();
  for (int c = 0; c < cols; ++c) {
    scalar_t v = x[r * cols + c];
    if (v > m) m = v;
  }
  out[r] = m * 2 - scalar_t(0.5f);
}

torch::Tensor bin_add_op(torch::Tensor x, torch::Tensor bin, int64_t nbins) {
  auto out = torch::zeros({nbins}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "bin_add", [&] {
    bin_add<scalar_t><<<(x.numel() + 127) / 128, 128>>>(
        x.data_ptr<scalar_t>(), bin.data_ptr<int64_t>(), out.data_ptr<scalar_t>(), x.numel());
  });
  return out;
}

torch::Tensor row_max_op(torch::Tensor x) {
  auto out = torch::empty({x.size(0)}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "row_max", [&] {
    row_max<scalar_t><<<(x.size(0) + 63) / 64, 64>>>(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                                     x.size(0), x.size(1));
  });
  return out;
}
