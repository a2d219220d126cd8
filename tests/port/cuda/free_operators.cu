// Free device operators at file scope: `a * b` never names `operator*`, so they are reached
// through the types they take (a vector type of the compat header, a struct of the file).
struct cplx { float re, im; };

__device__ inline cplx operator*(const cplx& a, const cplx& b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

__device__ inline float3 operator*(const float3& a, const float b) {
  return make_float3(a.x * b, a.y * b, a.z * b);
}

__device__ inline float3 operator+(const float3& a, const float3& b) {
  return make_float3(a.x + b.x, a.y + b.y, a.z + b.z);
}

__device__ inline float dot3(const float3& a, const float3& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}

const auto kHalf = 0.5;  // a double: converted to float by operator*'s parameter

__global__ void half_plus_norm(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float3 v = make_float3(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
    float3 w = v * kHalf + v;
    y[i] = dot3(w, w);
  }
}

__global__ void cplx_square(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    cplx a = {x[2 * i], x[2 * i + 1]};
    cplx b = a * a;
    y[2 * i] = b.re;
    y[2 * i + 1] = b.im;
  }
}
