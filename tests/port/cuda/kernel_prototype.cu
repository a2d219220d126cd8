// Kernel prototypes before the host code that launches them (a `static` one, one whose
// parameters are const pointers): the wrapper carries the kernel's name, the prototype goes.
typedef float2 Complex;

static __global__ void scale_complex(Complex *, const Complex *, int, float);
__global__ void copy_floats(const float *, int, float *);

int run(Complex *a, const Complex *b, int n) {
  scale_complex<<<(n + 63) / 64, 64>>>(a, b, n, 0.5f);
  return 0;
}

static __global__ void scale_complex(Complex *a, const Complex *b, int size, float scale) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < size) {
    a[i].x = b[i].x * scale;
    a[i].y = b[i].y * scale;
  }
}

__global__ void copy_floats(const float *x, int n, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
