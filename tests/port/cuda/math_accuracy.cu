// One kernel, one math function per `fn` (tests/port/test_math_accuracy.py)
#include <cuda_runtime.h>
#include <math.h>

__global__ void math_eval(int fn, const float *a, const float *b, float *y, float *y2, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = a[i], w = b[i];
    switch (fn) {
      case 0: y[i] = sinf(v); break;
      case 1: y[i] = cosf(v); break;
      case 2: y[i] = tanf(v); break;
      case 3: y[i] = asinf(v); break;
      case 4: y[i] = acosf(v); break;
      case 5: y[i] = atanf(v); break;
      case 6: y[i] = sinhf(v); break;
      case 7: y[i] = coshf(v); break;
      case 8: y[i] = tanhf(v); break;
      case 9: y[i] = asinhf(v); break;
      case 10: y[i] = acoshf(v); break;
      case 11: y[i] = atanhf(v); break;
      case 12: y[i] = expf(v); break;
      case 13: y[i] = exp2f(v); break;
      case 14: y[i] = exp10f(v); break;
      case 15: y[i] = expm1f(v); break;
      case 16: y[i] = logf(v); break;
      case 17: y[i] = log2f(v); break;
      case 18: y[i] = log10f(v); break;
      case 19: y[i] = log1pf(v); break;
      case 20: y[i] = sqrtf(v); break;
      case 21: y[i] = rsqrtf(v); break;
      case 22: y[i] = cbrtf(v); break;
      case 23: y[i] = erff(v); break;
      case 24: y[i] = erfcf(v); break;
      case 25: y[i] = erfinvf(v); break;
      case 26: y[i] = lgammaf(v); break;
      case 27: y[i] = tgammaf(v); break;
      case 28: y[i] = sinpif(v); break;
      case 29: y[i] = cospif(v); break;
      case 30: y[i] = normcdff(v); break;
      case 31: y[i] = rcbrtf(v); break;
      case 32: y[i] = __expf(v); break;
      case 33: y[i] = __exp10f(v); break;
      case 34: y[i] = __logf(v); break;
      case 35: y[i] = __log2f(v); break;
      case 36: y[i] = __log10f(v); break;
      case 37: y[i] = __sinf(v); break;
      case 38: y[i] = __cosf(v); break;
      case 39: y[i] = __frcp_rn(v); break;
      case 40: y[i] = __fsqrt_rn(v); break;
      case 41: y[i] = __saturatef(v); break;
      case 100: y[i] = powf(v, w); break;
      case 101: y[i] = atan2f(v, w); break;
      case 102: y[i] = hypotf(v, w); break;
      case 103: y[i] = fmodf(v, w); break;
      case 104: y[i] = __fdividef(v, w); break;
      case 105: y[i] = fdividef(v, w); break;
      case 106: y[i] = __powf(v, w); break;
      case 107: y[i] = __fdiv_rn(v, w); break;
      case 200: { float s, c; sincosf(v, &s, &c); y[i] = s; y2[i] = c; } break;
      case 201: { float s, c; __sincosf(v, &s, &c); y[i] = s; y2[i] = c; } break;
      default: y[i] = -1.f;
    }
  }
}
