"""tests/port/cuda/directed_rounding.cu: ``__fadd_rd`` / ``__dmul_ru`` / ``__fsqrt_rz``-style
directed-rounding intrinsics (cuda-samples' interval arithmetic; were undeclared). Each
result is checked exactly with rationals: rounded down means result <= exact < the next
value up, up the mirror, toward zero the one of the two nearer zero (the exact value is
the operation on the float64 inputs computed in ``fractions.Fraction``)."""

import math
from fractions import Fraction

import pytest
import torch

OPS = ("add", "sub", "mul", "div", "sqrt")


def _exact(op, x, y):
    fx, fy = Fraction(x), Fraction(y)
    if op == "add":
        return fx + fy
    if op == "sub":
        return fx - fy
    if op == "mul":
        return fx * fy
    if op == "div":
        return fx / fy
    return None  # sqrt: checked by squaring


def _check(op, mode, x, y, r, np_type):
    """r is the exact result rounded in direction ``mode``: rounded down, r <= exact and
    the next value up is above it; up, the mirror; toward zero, down for a non-negative
    exact result and up for a negative one."""
    import numpy as np
    if op == "sqrt":
        a = Fraction(abs(x))
        below = lambda v: v <= 0 or Fraction(float(v)) ** 2 <= a  # noqa: E731  v <= sqrt(a)
        above = lambda v: v >= 0 and Fraction(float(v)) ** 2 >= a  # noqa: E731
        negative = False
    else:
        e = _exact(op, x, y)
        below = lambda v: Fraction(float(v)) <= e  # noqa: E731
        above = lambda v: Fraction(float(v)) >= e  # noqa: E731
        negative = e < 0
    up = np.nextafter(np_type(r), np_type(np.inf))
    down = np.nextafter(np_type(r), np_type(-np.inf))
    if mode == "rd" or (mode == "rz" and not negative):
        return below(r) and not below(up)
    return above(r) and not above(down)


@pytest.mark.l1
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_directed_rounding_brackets_the_exact_result(cuda_module, dtype):
    import numpy as np
    m = cuda_module("directed_rounding")
    g = torch.Generator().manual_seed(22)
    n = 600
    a = (torch.randn(n, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-3, 4, (n,), generator=g).double()).to(dtype)
    b = (torch.randn(n, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-3, 4, (n,), generator=g).double()).to(dtype)
    a[:4] = torch.tensor([1.0, 3.0, -2.5, 0.1], dtype=dtype)  # exact cases and cancellation
    b[:4] = torch.tensor([-1.0, 3.0, 2.5, 0.7], dtype=dtype)
    out = torch.full((n, 15), float("nan"), dtype=dtype)
    kern = m.directed_f if dtype == torch.float32 else m.directed_d
    kern[(n + 63) // 64, 64](a, b, out, n)
    np_type = np.float32 if dtype == torch.float32 else np.float64
    bad = []
    for i in range(n):
        x, y = float(a[i]), float(b[i])
        for k, op in enumerate(OPS):
            for j, mode in enumerate(("rd", "ru", "rz")):
                r = out[i, 3 * k + j].item()
                if math.isnan(r) or not _check(op, mode, x, y, r, np_type):
                    bad.append((op, mode, x, y, r))
    assert not bad, bad[:5]
    # signs: x + (-x) is -0 rounding down, +0 otherwise
    assert math.copysign(1, out[0, 0].item()) == -1 and math.copysign(1, out[0, 1].item()) == 1
