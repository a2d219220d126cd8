// A device printf whose format is a local const pointer initialized with a literal.
__global__ void clamp_warn(const float *x, float *y, float hi, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const char *warning =
        "clamped an element "
        "above the limit\n";
    float v = x[i];
    if (v > hi) {
        if (i == 0) printf(warning);
        v = hi;
    }
    y[i] = v * 2.0f;
}
