// A sub-project's header that happens to be named like the C library's: reached only
// through an -I folder, never by <math.h> (NOTE [standard headers] in parse.py).
#pragma once
__device__ inline float3 operator+(const float3& a, const float3& b) {
  return make_float3(a.x + b.x, a.y + b.y, a.z + b.z);
}
