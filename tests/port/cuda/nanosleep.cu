// __nanosleep as a back-off in a retry loop (CUDA: a sleep of about ns, in [0, 2 * ns]).
__global__ void backoff_sum(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 0.0f;
        unsigned int ns = 8;
        for (int k = 0; k < 4; ++k) {
            __nanosleep(ns);
            ns = ns < 256 ? 2 * ns : 256;
            s += x[i];
        }
        y[i] = s;
    }
}
