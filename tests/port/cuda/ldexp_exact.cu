// ldexpf / ldexp (float and double), std::ldexp and an int converted to float, as
// dequantization kernels scale by a power of two.
__global__ void scale_f(const float * x, const int * e, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[2 * i + 0] = ldexpf(x[i], e[i]);
        y[2 * i + 1] = std::ldexp(x[i], e[i]);
    }
}

__global__ void scale_d(const double * x, const int * e, double * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = ldexp(x[i], e[i]);
    }
}

// The exponent computed per lane from packed bits (an fp8 scale decoder): the shape that
// the CPU device's JIT vectorized to the missing _Z5ldexpDv32_fDv32_iS_.
static __device__ __forceinline__ float decode_scale(unsigned char x) {
    if (x == 0 || x == 0x7F) {
        return 0.0f;
    }
    const int exp = (x >> 3) & 0xF;
    const int man = x & 0x7;
    float raw;
    if (exp == 0) {
        raw = ldexpf((float) man, -9);
    } else {
        raw = ldexpf(1.0f + (float) man / 8.0f, exp - 7);
    }
    return raw / 2;
}

__global__ void decode_scales(const unsigned char * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = decode_scale(x[i]);
    }
}
