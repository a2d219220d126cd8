// A launch in a plain host function whose template argument is a file-scope typedef that
// shares its name with host templates' own parameters.
#define REAL double
typedef REAL T;

template <typename T>
__global__ void axpb(const T *x, T *y, T a, T b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}

template <class T> T host_max(T a, T b) { return a > b ? a : b; }

int main()
{
    T *x = nullptr, *y = nullptr;
    int n = host_max(10, 20);
    axpb<T><<<1, 32>>>(x, y, (T)2.5, (T)-1.0, n);
    return 0;
}
