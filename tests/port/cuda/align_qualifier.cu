// __align__ where nvcc accepts it: after const, before the type, on a struct.
struct __align__(8) pair_f { float a; float b; };

__global__ void aligned_locals(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const __align__(16) float bias[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    __align__(16) float tmp[4];
    if (i < n) {
        for (int k = 0; k < 4; ++k) {
            tmp[k] = x[i] * bias[k];
        }
        pair_f p = {tmp[0] + tmp[1], tmp[2] + tmp[3]};
        y[i] = p.a + p.b + (float) (alignof(pair_f) + ((size_t) tmp % 16));
    }
}
