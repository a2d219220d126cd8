// A chain of host templates down to a kernel named as a value: a local constexpr as an
// explicit template argument (constexpr bool neg = true; f<N, neg>(...)), an `if constexpr`
// head alone in an #if branch with its block after the #endif, and a call of a helper
// that gives its defaulted last parameter.
template <int n_rep, bool negate>
__global__ void repeat_add(const float * x, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 0.0f;
        for (int r = 0; r < n_rep; ++r) {
            s += x[i];
        }
        y[i] = negate ? -s : s;
    }
}

template <int n_rep>
__global__ void fill_rep(float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = n_rep;
    }
}

typedef void (*repeat_kernel_t)(const float *, float *, const int);

template <int n_rep>
static void launch_repeat(repeat_kernel_t kernel, const float * x, float * y, const int n,
                          cudaStream_t stream, const int block = 64) {
    if (x == nullptr) {
        fill_rep<n_rep><<<(n + block - 1) / block, block, 0, stream>>>(y, n);
        return;
    }
    kernel<<<(n + block - 1) / block, block, 0, stream>>>(x, y, n);
}

template <int n_rep, bool negate>
static void repeat_switch(const float * x, float * y, const int n, cudaStream_t stream) {
#ifdef SOME_OTHER_BACKEND
    if constexpr (n_rep <= 8) {
        if (n > 16) {
            repeat_kernel_t kernel = repeat_add<n_rep, negate>;
            launch_repeat<n_rep>(kernel, x, y, n, stream, 64);
            return;
        }
    }
#endif // SOME_OTHER_BACKEND

#ifndef SOME_OTHER_BACKEND
    if constexpr (n_rep <= 4)
#endif // SOME_OTHER_BACKEND
    {
        repeat_kernel_t kernel = repeat_add<n_rep, negate>;
        launch_repeat<n_rep>(kernel, x, y, n, stream, 32);
        return;
    }
}

template <int n_rep>
void repeat_case(const float * x, float * y, const int n, const bool negate, cudaStream_t stream) {
    if (negate) {
        constexpr bool neg = true;
        repeat_switch<n_rep, neg>(x, y, n, stream);
    } else {
        constexpr bool neg = false;
        repeat_switch<n_rep, neg>(x, y, n, stream);
    }
}

void repeat_any(const float * x, float * y, const int n, const bool negate, cudaStream_t stream) {
    repeat_case<3>(x, y, n, negate, stream);
}
