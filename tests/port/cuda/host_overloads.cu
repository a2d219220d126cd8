// Host code shapes that bind a kernel's template parameters: a statement macro written
// without its ';' just before a local declaration, and a host template overloaded by
// arity whose short form (a context and two buffers) calls the long one.
struct buffer { void * data; long n; };

#define LOCAL_SIZES const long n0 = src->n; const long n1 = dst->n;

template <typename src_t, typename dst_t>
__global__ void widen(const src_t * __restrict__ x, dst_t * __restrict__ y, const long n) {
    const long i = blockIdx.x * (long) blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = (dst_t) x[i] * (dst_t) 3;
    }
}

void widen_float_to_double(const buffer * src, buffer * dst, cudaStream_t stream) {
    LOCAL_SIZES

    const float * x = (const float *) src->data;
    double * y = (double *) dst->data;
    widen<<<(n0 + 63) / 64, 64, 0, stream>>>(x, y, n1);
}

template <typename src_t, typename dst_t>
static void scale_rows(const src_t * x, dst_t * y, const long n, const int block, cudaStream_t stream) {
    widen<<<(n + block - 1) / block, block, 0, stream>>>(x, y, n);
}

template <typename src_t>
static void scale_rows(int ctx, const buffer * src, buffer * dst) {
    const src_t * x = (const src_t *) src->data;
    if (ctx == 0) {
        scale_rows(x, (int *) dst->data, src->n, 64, 0);
    } else {
        scale_rows(x, (float *) dst->data, src->n, 64, 0);
    }
}

void scale_rows_any(int ctx, const buffer * src, buffer * dst) {
    scale_rows<int>(ctx, src, dst);
}
