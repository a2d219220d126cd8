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

// leading template arguments written at the launch, the rest deduced from the arguments
template <bool negate, typename T, typename D>
static __global__ void scale_to(const T * x, D * dst, const float s, const int k) {
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < k) {
        dst[i] = (D) ((negate ? -s : s) * (float) x[i]);
    }
}

template <bool negate, typename T, typename D>
static void scale_to_launch(const T * x, D * dst, const float s, const int k) {
    scale_to<negate><<<(k + 63) / 64, 64>>>(x, dst, s, k);
}

void scale_op(const void * src, void * dst, float s, int k) {
    scale_to_launch<true>((const float *) src, (double *) dst, s, k);
}
