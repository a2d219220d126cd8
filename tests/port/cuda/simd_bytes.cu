// Per-byte SIMD intrinsics on packed int8 quants (as quantized matmul kernels use them).
__global__ void byte_ops(const unsigned * a, const unsigned * b, unsigned * out, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[3 * i + 0] = __vsub4(a[i], b[i]);
        out[3 * i + 1] = __vsubss4(a[i], b[i]);
        out[3 * i + 2] = __vcmpne4(a[i], b[i]);
    }
}
