// cuComplex.h / cuFFT complex types in kernels (pointwise spectrum products, as FFT
// convolution samples write them).
#include <cuComplex.h>
#include <cufft.h>

__global__ void complex_ops(const cufftComplex* a, const cufftComplex* b, cufftComplex* mul,
                            cufftComplex* div, float* absv, cuDoubleComplex* dmul, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    cuComplex x = a[i], y = b[i];
    mul[i] = cuCmulf(cuConjf(x), cuCaddf(y, make_cuComplex(1.0f, 0.0f)));
    div[i] = cuCdivf(x, y);
    absv[i] = cuCabsf(cuCsubf(x, y));
    cuDoubleComplex xd = cuComplexFloatToDouble(x), yd = cuComplexFloatToDouble(y);
    dmul[i] = cuCmul(xd, yd);
  }
}
