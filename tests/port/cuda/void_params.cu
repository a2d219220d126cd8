// C's empty parameter list `(void)`: no parameters (it was read as one unnamed `void`).
#define N 256

__device__ float g_out[N];

__global__ void fill_sines(void)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) g_out[i] = sinf(0.01f * i) * (float)i;
}

__global__ void
scale_out(
    void
)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) g_out[i] *= 0.5f;
}

void run(void)
{
    fill_sines<<<N / 64, 64>>>();
    scale_out<<<N / 64, 64>>>();
}
