// CUDA's directed-rounding intrinsics (interval arithmetic): op k of 0..4 = add, sub, mul,
// div, sqrt; rounding r of 0..2 = rd, ru, rz.
__global__ void directed_f(const float *a, const float *b, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i];
    float *o = out + 15 * i;
    o[0] = __fadd_rd(x, y);  o[1] = __fadd_ru(x, y);  o[2] = __fadd_rz(x, y);
    o[3] = __fsub_rd(x, y);  o[4] = __fsub_ru(x, y);  o[5] = __fsub_rz(x, y);
    o[6] = __fmul_rd(x, y);  o[7] = __fmul_ru(x, y);  o[8] = __fmul_rz(x, y);
    o[9] = __fdiv_rd(x, y);  o[10] = __fdiv_ru(x, y); o[11] = __fdiv_rz(x, y);
    float ax = fabsf(x);
    o[12] = __fsqrt_rd(ax);  o[13] = __fsqrt_ru(ax);  o[14] = __fsqrt_rz(ax);
}

__global__ void directed_d(const double *a, const double *b, double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i];
    double *o = out + 15 * i;
    o[0] = __dadd_rd(x, y);  o[1] = __dadd_ru(x, y);  o[2] = __dadd_rz(x, y);
    o[3] = __dsub_rd(x, y);  o[4] = __dsub_ru(x, y);  o[5] = __dsub_rz(x, y);
    o[6] = __dmul_rd(x, y);  o[7] = __dmul_ru(x, y);  o[8] = __dmul_rz(x, y);
    o[9] = __ddiv_rd(x, y);  o[10] = __ddiv_ru(x, y); o[11] = __ddiv_rz(x, y);
    double ax = fabs(x);
    o[12] = __dsqrt_rd(ax);  o[13] = __dsqrt_ru(ax);  o[14] = __dsqrt_rz(ax);
}
