// Parser recovery: a header-style host API tree-sitter cannot read (prototypes wrapped in
// attribute macros), a host function holding #define/#if lines, and a device table spelled
// through function-like macros. Every kernel after them must still be found and compiled.
#include <cstdio>

#define API_DEPRECATED(func, hint) func __attribute__((deprecated(hint)))
#define API_FORMAT(a, b) __attribute__((format(printf, a, b)))

struct ctx;
struct tensor { int n; float *data; };

API_DEPRECATED(struct tensor * tensor_new_old(
        struct ctx * c,
        int          n),
    "use tensor_new");

API_FORMAT(2, 3)
void ctx_log(struct ctx * c, const char * fmt, ...);

API_DEPRECATED(
    double tensor_nbytes_f(const struct tensor * t), // bytes as a float
    "use tensor_nbytes");

static void configure_host(int verbose) {
#ifndef TILE_FACTOR
#define TILE_FACTOR 3.0f
#endif
    if (verbose) printf("tile %f\n", TILE_FACTOR);
}

#define TABLE_BEGIN(type, name, size) static const __device__ type name[size] = {
#define TABLE_END() };

TABLE_BEGIN(float, weights, 4)
    1.0f, 2.0f, 4.0f, 8.0f
TABLE_END()

// after the unreadable prototypes: tree-sitter's error recovery used to swallow these
__global__ void scale_after_errors(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = TILE_FACTOR * x[i];
}

__global__ void weigh(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = weights[i % 4] * x[i];
}

// launch bounds computed by constexpr calls, with the third (max blocks per cluster)
// argument: occupancy hints only
constexpr __host__ __device__ int bound_threads(int warps, int width, int halve) { return warps * width / (halve ? 2 : 1); }

__global__ void __launch_bounds__(bound_threads(8, 32, 1), 1, 2)
bounded_add(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
