// A host-only build's fallback for CUDA's vector types (the project's build defines
// WITH_GPU_BUILD for nvcc): nvcc never compiles these definitions, so neither may the port.
#ifdef WITH_GPU_BUILD
#include <vector_types.h>
#else
struct float2 {
  float x, y;
};
struct int2 {
  int x, y;
};
#endif

// qualifiers through two levels of macros, one definition per compiler
#ifdef __CUDACC__
#define XV_DEV __device__
#define XV_INL __forceinline__
#else
#define XV_DEV
#define XV_INL inline
#endif
#define XV_IHD XV_INL XV_DEV

XV_IHD float2 operator-(const float2& a, const float2& b) { return make_float2(a.x - b.x, a.y - b.y); }
XV_IHD float cross2(const float2& a, const float2& b) { return a.x * b.y - a.y * b.x; }

__global__ void signed_area(const float* p, const int* idx, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float2* v = reinterpret_cast<const float2*>(p);
    int2 e = make_int2(idx[2 * i], idx[2 * i + 1]);
    float2 a = v[e.x], b = v[e.y];
    out[i] = cross2(b - a, a);
  }
}
