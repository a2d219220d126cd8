// ATen's TensorInfo passed to a kernel by value (as PyTorch extensions do with
// at::cuda::detail::getTensorInfo): sizes and strides of a strided view, the element offset
// of a linear index through IndexToOffset (dims read at run time: Dims = -1).
#include <torch/extension.h>
#include <ATen/cuda/detail/TensorInfo.cuh>
#include <ATen/cuda/detail/IndexUtils.cuh>

__global__ void gather_strided(const float *src, const at::cuda::detail::TensorInfo<float, int> info,
                               float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = src[at::cuda::detail::IndexToOffset<float, int, -1>::get(i, info)] +
             (info.isContiguous() ? 1000.f : 0.f);
}
