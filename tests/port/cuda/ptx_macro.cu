// Inline PTX hidden in macros (NOTE [PTX through a macro]): refused naming the macro, also
// through a second macro; a macro whose other definition is portable is no reason.
#include <cstdint>

#define LOAD_SHARED_U32(R, addr) asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(R) : "r"(addr))
#define LOAD_TWICE(R0, R1, addr) \
  LOAD_SHARED_U32(R0, addr);     \
  LOAD_SHARED_U32(R1, addr)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HALVE(x) asm("mul.f32 %0, %0, 0f3F000000;" : "+f"(x))
#else
#define HALVE(x) ((x) *= 0.5f)
#endif

__global__ void load_direct(uint32_t *out) {
  __shared__ uint32_t s[32];
  s[threadIdx.x] = threadIdx.x;
  uint32_t r;
  LOAD_SHARED_U32(r, (uint32_t)(threadIdx.x * 4));
  out[threadIdx.x] = r;
}

__global__ void load_nested(uint32_t *out) {
  uint32_t a, b;
  LOAD_TWICE(a, b, 0u);
  out[threadIdx.x] = a + b;
}

__global__ void halve(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    HALVE(v);
    x[i] = v;
  }
}
