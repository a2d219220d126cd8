"""Each math function and fast intrinsic the compat header maps, within CUDA's documented
error bound (tests/port/math_bounds.py names the source), on the CPU SYCL device against
float64 references: random arguments over each function's domain plus edge values, one
kernel (tests/port/cuda/math_accuracy.cu), outputs poisoned with NaN."""

import math
import re
import zlib

import pytest
import torch

from . import math_bounds as B
from .conftest import CUDA

SRC = CUDA / "math_accuracy.cu"
N = 20000
T = torch.float64
REF = {
    "sinf": torch.sin, "cosf": torch.cos, "tanf": torch.tan, "asinf": torch.asin, "acosf": torch.acos,
    "atanf": torch.atan, "sinhf": torch.sinh, "coshf": torch.cosh, "tanhf": torch.tanh, "asinhf": torch.asinh,
    "acoshf": torch.acosh, "atanhf": torch.atanh, "expf": torch.exp, "exp2f": torch.exp2,
    "exp10f": lambda x: torch.pow(10.0, x), "expm1f": torch.expm1, "logf": torch.log, "log2f": torch.log2,
    "log10f": torch.log10, "log1pf": torch.log1p, "sqrtf": torch.sqrt, "rsqrtf": torch.rsqrt,
    "cbrtf": lambda x: x.sign() * x.abs().pow(1 / 3), "rcbrtf": lambda x: x.sign() / x.abs().pow(1 / 3),
    "erff": torch.erf, "erfcf": torch.erfc, "erfinvf": torch.erfinv, "lgammaf": torch.lgamma,
    "tgammaf": lambda x: torch.where((x < 0) & (x == x.floor()), math.nan, torch.exp(torch.lgamma(x))), "sinpif": lambda x: torch.sin(math.pi * x),
    "cospif": lambda x: torch.cos(math.pi * x), "normcdff": lambda x: 0.5 * torch.erfc(-x / math.sqrt(2)),
    "__expf": torch.exp, "__exp10f": lambda x: torch.pow(10.0, x), "__logf": torch.log, "__log2f": torch.log2,
    "__log10f": torch.log10, "__sinf": torch.sin, "__cosf": torch.cos, "__frcp_rn": torch.reciprocal,
    "__fsqrt_rn": torch.sqrt, "__saturatef": lambda x: x.clamp(0, 1),
    "powf": torch.pow, "atan2f": torch.atan2, "hypotf": torch.hypot, "fmodf": torch.fmod,
    "__fdividef": torch.div, "fdividef": torch.div, "__powf": torch.pow, "__fdiv_rn": torch.div,
}


def _ids():
    """function name -> its `case` number in math_accuracy.cu"""
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"case (\d+): y\[i\] = (\w+)\(", SRC.read_text())}


def _sample(dom, n, g):
    lo, hi, kind = dom
    u = torch.rand(n, generator=g, dtype=T)
    if kind == "lin":
        x = lo + (hi - lo) * u
    else:
        x = torch.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * u)
        if kind == "sym":
            x = x * torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0).to(T)
    return x.float()


def _ulps(y, r):
    """|y - r| in float32 ulps of r (r exact, in float64)."""
    e = torch.floor(torch.log2(r.abs().clamp_min(2.0 ** -149)))
    ulp = torch.exp2(torch.clamp(e, min=-126) - 23)
    return (y.double() - r).abs() / ulp


def _allowed(bound, x):
    if isinstance(bound, int):
        return torch.full_like(x.double(), bound + 0.5), None
    if bound[0] == "ulp_of_x":
        return bound[1] + torch.floor((bound[2] * x.double()).abs()) + 0.5, None
    _, eps, lo, hi, outside = bound
    inside = (x >= lo) & (x <= hi)
    ulps = torch.full_like(x.double(), math.inf if outside is None else outside + 0.5)
    return ulps, (inside, eps)


@pytest.fixture(scope="module")
def mathmod(sycl_device):
    import xvendor.port
    return xvendor.port.load(SRC)


def measure(mod, name, x, w):
    n = x.numel()
    y, y2 = torch.full((n,), float("nan")), torch.full((n,), float("nan"))
    mod.math_eval[(n + 127) // 128, 128](_ids()[name], x, w, y, y2, n)
    return y


def check(name, x, w, y):
    two = name in B.TWO
    bound = B.TWO[name][0] if two else B.ONE[name][0]
    r = (REF[name](x.double(), w.double()) if two else REF[name](x.double()))
    finite = torch.isfinite(r) & (r.abs() <= 3.4028234663852886e38)
    # non-finite references: the same class (NaN, or the same infinity)
    bad_special = ~finite & ~((torch.isnan(r) & torch.isnan(y)) | (r == y.double()))
    ulps, absolute = _allowed(bound, x)
    err = _ulps(y[finite], r[finite])
    ok = err <= ulps[finite]
    if absolute is not None:
        inside, eps = absolute
        ok = ok | (inside[finite] & ((y[finite].double() - r[finite]).abs() <= eps))
    worst = float(err.max()) if err.numel() else 0.0
    return int((~ok).sum()) + int(bad_special.sum()), worst


EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-38, 1e-45, 3.0e38, float("inf"), -float("inf"), float("nan")]


@pytest.mark.l1
@pytest.mark.parametrize("name", sorted(B.ONE))
def test_one_argument_functions_within_cuda_bounds(mathmod, name):
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    x = _sample(B.ONE[name][1], N, g)
    bad, worst = check(name, x, x, measure(mathmod, name, x, x))
    assert bad == 0, f"{name}: {bad}/{N} beyond {B.ONE[name][0]} (worst {worst:.2f} ulp)"
    e = torch.tensor(EDGES)
    y = measure(mathmod, name, e, e)
    r = REF[name](e.double())
    # edge values: no NaN where the reference is a number (infinities and zeros kept)
    assert not (torch.isnan(y) & ~torch.isnan(r)).any(), f"{name}({e.tolist()}) -> {y.tolist()}"


@pytest.mark.l1
@pytest.mark.parametrize("name", sorted(B.TWO))
def test_two_argument_functions_within_cuda_bounds(mathmod, name):
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    _, dx, dy = B.TWO[name]
    x, w = _sample(dx, N, g), _sample(dy, N, g)
    bad, worst = check(name, x, w, measure(mathmod, name, x, w))
    assert bad == 0, f"{name}: {bad}/{N} beyond {B.TWO[name][0]} (worst {worst:.2f} ulp)"


@pytest.mark.l1
@pytest.mark.parametrize("fn, ref", [(200, (torch.sin, torch.cos)), (201, (torch.sin, torch.cos))])
def test_sincos(mathmod, fn, ref):
    x = torch.linspace(-math.pi, math.pi, 4001)
    y, y2 = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    mathmod.math_eval[(x.numel() + 127) // 128, 128](fn, x, x, y, y2, x.numel())
    tol = 2.5 if fn == 200 else None
    for got, f in zip((y, y2), ref):
        r = f(x.double())
        if tol is None:  # __sincosf: CUDA's absolute 2^-21.41 on [-pi, pi]
            assert float((got.double() - r).abs().max()) <= 2 ** -21.41
        else:
            assert float(_ulps(got, r).max()) <= tol
