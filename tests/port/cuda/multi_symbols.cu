// Several module symbols in one declaration: each is its own buffer.
__device__ static unsigned int n_neg = 0, n_pos = 0;
__device__ float sum_neg[1], sum_pos[1];

__global__ void split_count(const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (x[i] < 0.0f) { atomicAdd(&n_neg, 1u); atomicAdd(sum_neg, x[i]); }
    else { atomicAdd(&n_pos, 1u); atomicAdd(&sum_pos[0], x[i]); }
}

__global__ void read_counts(unsigned int *out) { out[0] = n_neg; out[1] = n_pos; }
