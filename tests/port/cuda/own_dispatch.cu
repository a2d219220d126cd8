// A dispatch macro of the file's own in the style of AT_DISPATCH_*: a run-time switch binds
// a compile-time constant (or a type alias) per case, then calls the lambda it is given
// (NOTE [project dispatch macros]).
#include <map>
#include <string>

enum Combine { ADD, MUL, MAXIMUM };
const std::map<std::string, Combine> combine_of = {{"add", ADD}, {"mul", MUL}, {"max", MAXIMUM}};

#define DISPATCH_COMBINE(op, ...)                 \
  [&] {                                           \
    switch (combine_of.at(op)) {                  \
    case ADD: {                                   \
      static constexpr Combine C = ADD;           \
      return __VA_ARGS__();                       \
    }                                             \
    case MUL: {                                   \
      static constexpr Combine C = MUL;           \
      return __VA_ARGS__();                       \
    }                                             \
    case MAXIMUM: {                               \
      static constexpr Combine C = MAXIMUM;       \
      return __VA_ARGS__();                       \
    }                                             \
    }                                             \
  }()

#define DISPATCH_WIDE(wide, ...)                  \
  [&] {                                           \
    if (wide) {                                   \
      using acc_t = double;                       \
      return __VA_ARGS__();                       \
    } else {                                      \
      using acc_t = float;                        \
      return __VA_ARGS__();                       \
    }                                             \
  }()

// the bound name given by the caller (a macro parameter)
#define FLAG_SWITCH(COND, NAME, ...)              \
  [&] {                                           \
    if (COND) {                                   \
      static constexpr int NAME = 3;              \
      return __VA_ARGS__();                       \
    } else {                                      \
      static constexpr int NAME = 2;              \
      return __VA_ARGS__();                       \
    }                                             \
  }()

template <typename T, typename A, Combine C, int SCALE>
__global__ void combine(const T *x, const T *y, T *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  A a = x[i], b = y[i];
  A r = C == ADD ? a + b : C == MUL ? a * b : (a > b ? a : b);
  out[i] = (T)(r * SCALE);
}

void launch(const float *x, const float *y, float *out, int n, std::string op, bool wide) {
  DISPATCH_COMBINE(op, [&] {
    DISPATCH_WIDE(wide, [&] {
      FLAG_SWITCH(n > 100, kScale, [&] {
        combine<float, acc_t, C, kScale><<<(n + 255) / 256, 256>>>(x, y, out, n);
      });
    });
  });
}
