// Member functions of a class template defined outside the class, one returning a
// reference (`T const &box<T>::lower() const`).
template <class T> class box
{
public:
    __device__ __host__ box(T const &l, T const &u);
    __device__ __host__ T const &lower() const;
    __device__ __host__ T width() const;
private:
    T lo;
    T hi;
};
template <class T> inline __device__ __host__ box<T>::box(T const &l, T const &u) : lo(l), hi(u) {}
template <class T> inline __device__ __host__ T const &box<T>::lower() const { return lo; }
template <class T> inline __device__ __host__ T box<T>::width() const { return hi - lo; }

template <class T>
__global__ void widths(const T *a, const T *b, T *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { box<T> x(a[i], b[i]); out[i] = x.width() + x.lower(); }
}
void run(const double *a, const double *b, double *o, int n) { widths<double><<<1, 32>>>(a, b, o, n); }
