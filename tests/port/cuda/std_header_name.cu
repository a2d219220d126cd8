// <math.h> is the C library's even where an -I folder holds a math.h of its own.
#include <math.h>
#include <cmath>

__device__ inline float3 operator+(const float3& a, const float3& b) {
  return make_float3(a.x + b.x, a.y + b.y, a.z + b.z);
}

__global__ void add3(const float* a, const float* b, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float3 s = make_float3(a[3 * i], a[3 * i + 1], a[3 * i + 2]) +
               make_float3(b[3 * i], b[3 * i + 1], b[3 * i + 2]);
    y[i] = sqrtf(s.x * s.x + s.y * s.y + s.z * s.z);
  }
}
