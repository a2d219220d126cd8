"""CUDA's documented maximum errors of the math functions the compat header maps, as data.

Source: NVIDIA, CUDA C++ Programming Guide (12.x), appendix "Mathematical Functions":
table "Single-Precision Mathematical Standard Library Functions with Maximum ULP Error"
(full range unless noted) and section "Intrinsic Functions" (the ``__`` fast forms, with
their stated ranges). CUDA states the error against the correctly rounded float result;
measured against the exact (float64) value, a bound of b ulp allows b + 0.5.

Each entry: name -> (bound, domain). bound: ulps (int), or ("ulp_of_x", a, k) for
``a + floor(|k x|)`` ulps, or ("abs_in", eps, lo, hi, ulps_outside) for an absolute error
``eps`` on [lo, hi] and ``ulps_outside`` elsewhere. domain: (lo, hi) of |x| sampled
log-uniformly, with "+" for positive arguments only, "sym" for both signs, or "lin" for
uniform on [lo, hi].
"""

import math

ONE = {  # f(x)
    "sinf": (2, (1e-6, 1e4, "sym")), "cosf": (2, (1e-6, 1e4, "sym")), "tanf": (4, (1e-6, 1e4, "sym")),
    "asinf": (2, (-1, 1, "lin")), "acosf": (2, (-1, 1, "lin")), "atanf": (2, (1e-6, 1e6, "sym")),
    "sinhf": (3, (1e-6, 88, "sym")), "coshf": (2, (1e-6, 88, "sym")), "tanhf": (2, (1e-6, 20, "sym")),
    "asinhf": (3, (1e-6, 1e6, "sym")), "acoshf": (4, (1, 1e6, "+")), "atanhf": (3, (-0.9999, 0.9999, "lin")),
    "expf": (2, (1e-6, 87, "sym")), "exp2f": (2, (1e-6, 126, "sym")), "exp10f": (2, (1e-6, 37, "sym")),
    "expm1f": (1, (1e-6, 87, "sym")), "logf": (1, (1e-30, 1e30, "+")), "log2f": (1, (1e-30, 1e30, "+")),
    "log10f": (2, (1e-30, 1e30, "+")), "log1pf": (1, (-0.999, 1e4, "lin")),
    "sqrtf": (0, (1e-30, 1e30, "+")), "rsqrtf": (2, (1e-30, 1e30, "+")), "cbrtf": (1, (1e-30, 1e30, "sym")),
    "rcbrtf": (1, (1e-30, 1e30, "sym")), "erff": (2, (1e-6, 5, "sym")), "erfcf": (4, (-5, 10, "lin")),
    "erfinvf": (2, (-0.9999, 0.9999, "lin")),
    "lgammaf": (6, (0.01, 100, "+")),  # outside [-10.001, -2.264], where CUDA's bound is larger
    "tgammaf": (5, (0.01, 30, "+")), "sinpif": (1, (1e-6, 100, "sym")), "cospif": (1, (1e-6, 100, "sym")),
    "normcdff": (5, (-10, 5, "lin")),
    "__expf": (("ulp_of_x", 2, 1.173), (1e-6, 80, "sym")),
    "__exp10f": (("ulp_of_x", 2, 2.97), (1e-6, 35, "sym")),
    "__logf": (("abs_in", 2 ** -21.41, 0.5, 2.0, 3), (1e-30, 1e30, "+")),
    "__log2f": (("abs_in", 2 ** -22, 0.5, 2.0, 2), (1e-30, 1e30, "+")),
    "__log10f": (("abs_in", 2 ** -24, 0.5, 2.0, 3), (1e-30, 1e30, "+")),
    "__sinf": (("abs_in", 2 ** -21.41, -math.pi, math.pi, None), (-math.pi, math.pi, "lin")),
    "__cosf": (("abs_in", 2 ** -21.41, -math.pi, math.pi, None), (-math.pi, math.pi, "lin")),
    "__frcp_rn": (0, (1e-30, 1e30, "sym")), "__fsqrt_rn": (0, (1e-30, 1e30, "+")),
    "__saturatef": (0, (-2, 2, "lin")),
}
TWO = {  # f(x, y): (bound, x domain, y domain)
    "powf": (4, (1e-3, 1e3, "+"), (-10, 10, "lin")), "atan2f": (3, (1e-6, 1e6, "sym"), (1e-6, 1e6, "sym")),
    "hypotf": (3, (1e-6, 1e6, "sym"), (1e-6, 1e6, "sym")), "fmodf": (0, (1e-6, 1e6, "sym"), (1e-3, 1e3, "sym")),
    "__fdividef": (2, (1e-6, 1e6, "sym"), (1e-6, 1e6, "sym")), "fdividef": (2, (1e-6, 1e6, "sym"), (1e-6, 1e6, "sym")),
    "__powf": (4, (1e-3, 1e3, "+"), (-10, 10, "lin")),  # CUDA: exp2f(y * __log2f(x)); mapped to pow
    "__fdiv_rn": (0, (1e-6, 1e6, "sym"), (1e-6, 1e6, "sym")),
}
