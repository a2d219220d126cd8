// Integer roundings: std:: and C forms, float and double arguments.
#include <cmath>

__global__ void roundings(const float* xf, const double* xd, long* out, long long* out2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[4 * i + 0] = std::lround(xd[i]);
    out[4 * i + 1] = lroundf(xf[i]);
    out[4 * i + 2] = std::lrint(xd[i]);
    out[4 * i + 3] = lrintf(xf[i]);
    out2[2 * i + 0] = llround(xd[i]);
    out2[2 * i + 1] = std::llrint(xf[i]);
  }
}
