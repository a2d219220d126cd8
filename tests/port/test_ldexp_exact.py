"""tests/port/cuda/ldexp_exact.cu: ``ldexpf`` / ``ldexp`` / ``std::ldexp`` are exact (IEEE
ldexp rounds once) on the CPU SYCL device, whose own builtin the JIT vectorizes to a symbol
it lacks (``_Z5ldexpDv32_fDv32_i``: the whole program failed to link). Edge cases:
subnormal inputs and results, ties in the subnormal range, overflow, huge and tiny
exponents, zeros of both signs, inf and nan. References: ``torch.ldexp`` in float64 (exact
for the float cases: every product is representable in double) and Python's
``math.ldexp`` for the double cases (torch's ``x * 2**e`` loses exponents below -1074)."""

import math

import numpy as np
import pytest
import torch

F32_EDGE = [  # (x, e)
    (1.0, -149), (1.5, -149), (2.5, -149), (3.0, -150), (1.0, -150), (1.0000001, -150),
    (1e-40, 5), (1e-40, -3), (1e-45, 200), (1.17549435e-38, -1), (3.4028235e38, 1),
    (3.4028235e38, -276), (1.0, 127), (1.0, 128), (-0.0, 10), (0.0, -10), (-1.25, -140),
    (float("inf"), -5), (float("-inf"), 3), (float("nan"), 1), (5.0, 2**31 - 1),
    (5.0, -2**31), (1e-45, 2**31 - 1), (3.4028235e38, -2**31), (0.7, 301), (0.7, -301),
]
F64_EDGE = [
    (1.0, -1074), (1.5, -1074), (2.5, -1074), (3.0, -1075), (1.0, -1075), (5e-324, 2000),
    (5e-324, 1074), (1.7976931348623157e308, -2000), (1.7976931348623157e308, 1),
    (2.0 ** 100, -1100), (2.0 ** 1000, -2097), (2.0 ** -1000, 2046), (1.0, 1024), (-0.0, 7),
    (float("inf"), -9), (float("nan"), 2), (1.0000000000000002, -1075), (-3.0, -1075),
    (7.0, 2**31 - 1), (7.0, -2**31), (2.2250738585072014e-308, -52),
]


def _cases(edge, rng, lo, hi, dtype):
    x = np.array([c[0] for c in edge], dtype=dtype)
    e = np.array([c[1] for c in edge], dtype=np.int64)
    rx = (rng.standard_normal(200) * 10.0 ** rng.integers(-38, 38, 200)).astype(dtype)
    re = rng.integers(lo, hi, 200)
    return np.concatenate([x, rx]), np.concatenate([e, re]).astype(np.int32)


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64])
def test_ldexpf_exact(cuda_module, block):
    m = cuda_module("ldexp_exact")
    x, e = _cases(F32_EDGE, np.random.default_rng(7), -300, 300, np.float32)
    n = len(x)
    y = torch.full((2 * n,), float("nan"))  # poisoned
    m.scale_f[(n + block - 1) // block, block](torch.from_numpy(x), torch.from_numpy(e), y, n)
    ref = torch.ldexp(torch.from_numpy(x).double(), torch.from_numpy(e.clip(-400, 400)).double()).float()
    got = y.view(n, 2)
    for col in range(2):
        torch.testing.assert_close(got[:, col], ref, rtol=0, atol=0, equal_nan=True)
        # signs of zeros too
        assert torch.equal(torch.signbit(got[:, col]), torch.signbit(ref))


@pytest.mark.l1
def test_ldexp_double_exact(cuda_module):
    m = cuda_module("ldexp_exact")
    x, e = _cases(F64_EDGE, np.random.default_rng(8), -1200, 1200, np.float64)
    x[len(F64_EDGE):] *= 10.0 ** np.random.default_rng(9).integers(-250, 250, len(x) - len(F64_EDGE))
    n = len(x)
    y = torch.full((n,), float("nan"), dtype=torch.float64)
    m.scale_d[(n + 63) // 64, 64](torch.from_numpy(x), torch.from_numpy(e), y, n)
    def ref1(a, b):
        try:
            return math.ldexp(float(a), int(b))
        except OverflowError:
            return math.copysign(math.inf, a)
    ref = torch.tensor([ref1(a, b) for a, b in zip(x, e)], dtype=torch.float64)
    torch.testing.assert_close(y, ref, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(torch.signbit(y), torch.signbit(ref))
    # torch.ldexp agrees where its 2**e is a normal double
    ok = torch.from_numpy((np.abs(e) < 1000)).bool()
    tref = torch.ldexp(torch.from_numpy(x), torch.from_numpy(e).double())
    torch.testing.assert_close(y[ok], tref[ok], rtol=0, atol=0, equal_nan=True)


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128])
def test_ldexpf_per_lane_exponent_links(cuda_module, block):
    """Fails without the compat ldexpf: 'Symbols not found: [ _Z5ldexpDv32_fDv32_iS_ ]'."""
    m = cuda_module("ldexp_exact")
    x = torch.arange(256, dtype=torch.uint8)
    y = torch.full((256,), float("nan"))
    m.decode_scales[(256 + block - 1) // block, block](x, y, 256)
    v = np.arange(256)
    exp, man = (v >> 3) & 0xF, v & 7
    ref = np.where(exp == 0, man * 2.0 ** -9, (1 + man / 8) * 2.0 ** (exp - 7)) / 2
    ref[(v == 0) | (v == 0x7F)] = 0
    torch.testing.assert_close(y, torch.from_numpy(ref).float(), rtol=0, atol=0)
