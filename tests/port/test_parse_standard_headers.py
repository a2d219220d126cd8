"""tests/port/cuda/std_header_name.cu: ``#include <math.h>`` is never inlined from an -I
folder holding a ``math.h`` of its own (NOTE [standard headers] in parse.py): it pasted that
header's operators into the unit ('redefinition of operator+')."""

import pytest
import torch

import xvendor.port
from xvendor.port import build

from .conftest import CUDA

INC = [str(CUDA / "include" / "std_shadow")]


@pytest.mark.l0
def test_standard_header_not_taken_from_include_dirs():
    t = build.translate_file(CUDA / "std_header_name.cu", include_dirs=INC)
    assert t.report("add3").status == "ok"
    assert t.source.count("operator+(const float3& a") == 1


@pytest.mark.l1
def test_add3_compiles_and_runs(sycl_device):
    m = xvendor.port.load(CUDA / "std_header_name.cu", include_dirs=INC)
    n = 300
    a, b = torch.randn(n, 3), torch.randn(n, 3)
    y = torch.full((n,), float("nan"))
    m.add3[(n + 63) // 64, 64](a, b, y, n)
    torch.testing.assert_close(y.double(), (a.double() + b.double()).norm(dim=1), rtol=1e-6, atol=1e-6)
