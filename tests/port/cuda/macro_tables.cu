// Tables spelled through a macro defined once per backend, the device-code definition
// first and a host one last (as headers shared by several backends do): the tables the
// kernel reads must stay in the SYCL source.
#include <cstdint>

#define IMPL_DEVICE
#if defined(IMPL_DEVICE)
#define TABLE_BEGIN(type, name, size) static const __device__ type name[size] = {
#define TABLE_END() };
#else
#define TABLE_BEGIN(type, name, size) static const type name[size] = {
#define TABLE_END() };
#endif

TABLE_BEGIN(uint32_t, grid, 4)
    0x01010101, 0x02020202, 0x03030303,
    0x04040404,
TABLE_END()

TABLE_BEGIN(int8_t, kvalues, 4)
    -127, -10, 1, 13,
TABLE_END()

__global__ void table_lookup(const int * idx, int64_t * y, const int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = (int64_t) grid[idx[i]] + kvalues[idx[i]];
    }
}
