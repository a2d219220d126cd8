// A struct whose union member is marked with a macro that is __extension__ or nothing
// (per compiler), and whose union's struct member is named through a macro: the union
// must survive into the SYCL source (the static_assert and the kernel read through it).
#include <cuda_fp16.h>

#ifdef _MSC_VER
#define EXTENSION
#else
#define EXTENSION __extension__
#endif
#define AGGR_U
#define AGGR_S data

typedef struct {
    EXTENSION union {
        struct {
            half d;
            half m;
        } AGGR_S;
        half2 dm;
    } AGGR_U;
    unsigned char qs[16];
} block_dm;
static_assert(sizeof(block_dm) == 2 * sizeof(half) + 16, "wrong block size");

__global__ void block_scale(const block_dm * b, float * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = __low2float(b[i].dm) * b[i].qs[0] + __high2float(b[i].dm);
    }
}
