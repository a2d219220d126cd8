"""tests/port/cuda/int_rounding.cu: ``lround``/``llround``/``lrint``/``llrint`` (std:: and C
forms): the device compiler has no builtin for them ('builtin is not supported on this
target'); the compat header computes them (halfway cases away from zero for *round, to even
for *rint), compared with Python's exact rounding of the same values."""

import math

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_translates():
    assert build.translate_file(CUDA / "int_rounding.cu").report("roundings").status == "ok"


@pytest.mark.l1
def test_roundings(cuda_module):
    m = cuda_module("int_rounding")
    vals = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 2.4999998, -3.7, 1e9 + 0.5, -7.0, 0.0, 123456.75]
    vals += torch.randn(200, dtype=torch.float64).mul(1000).tolist()
    n = len(vals)
    xd = torch.tensor(vals, dtype=torch.float64)
    xf = xd.float()
    out = torch.full((n, 4), -999, dtype=torch.int64)
    out2 = torch.full((n, 2), -999, dtype=torch.int64)
    m.roundings[(n + 63) // 64, 64](xf, xd, out, out2, n)
    fv = [float(v) for v in xf.tolist()]
    def away(v):
        return int(math.copysign(math.floor(abs(v) + 0.5), v))
    assert out[:, 0].tolist() == [away(v) for v in vals]
    assert out[:, 1].tolist() == [away(v) for v in fv]
    assert out[:, 2].tolist() == [round(v) for v in vals]  # Python's round: to even
    assert out[:, 3].tolist() == [round(v) for v in fv]
    assert out2[:, 0].tolist() == [away(v) for v in vals]
    assert out2[:, 1].tolist() == [round(v) for v in fv]
