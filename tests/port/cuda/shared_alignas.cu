// __shared__ arrays with an alignment specifier, read back through float4.
__global__ void reverse4(const float* x, float* y, unsigned long long* misalign) {
  __shared__ alignas(alignof(float4)) float tile[64];
  __shared__ __align__(16) float tile2[64];
  int t = threadIdx.x;
  tile[t] = x[blockIdx.x * 64 + t];
  tile2[t] = 2.0f * x[blockIdx.x * 64 + t];
  __syncthreads();
  if (t < 16) {
    float4 v = reinterpret_cast<const float4*>(tile)[15 - t];
    float4 w = reinterpret_cast<const float4*>(tile2)[t];
    float* o = y + blockIdx.x * 64 + 4 * t;
    o[0] = v.w + w.x; o[1] = v.z + w.y; o[2] = v.y + w.z; o[3] = v.x + w.w;
  }
  if (t == 0)
    misalign[blockIdx.x] = (reinterpret_cast<unsigned long long>(tile) % 16) +
                           (reinterpret_cast<unsigned long long>(tile2) % 16);
}
