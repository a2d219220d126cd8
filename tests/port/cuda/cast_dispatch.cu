// Template kernels launched from a host template whose callers pass cast arguments (the
// type-erased `void *` buffers of a tensor library): the casts bind the template's types.
template <class T>
static __global__ void clamp_below(const T * x, T * dst, const T lo, const int k) {
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i >= k) {
        return;
    }
    dst[i] = x[i] < lo ? lo : x[i];
}

template <class T>
static void clamp_below_launch(const T * x, T * dst, const T lo, const int k) {
    clamp_below<<<(k + 63) / 64, 64>>>(x, dst, lo, k);
}

void clamp_op(const void * src, void * dst, float lo, int k, bool wide) {
    if (wide) {
        clamp_below_launch((const double *) src, (double *) dst, (double) lo, k);
    } else {
        clamp_below_launch(static_cast<const float *>(src), static_cast<float *>(dst), lo, k);
    }
}
