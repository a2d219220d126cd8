"""tests/port/cuda/nanosleep.cu: ``__nanosleep`` translates (a no-op: CUDA's sleep is
approximately ns, anywhere in [0, 2 * ns]) instead of refusing the kernel."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_nanosleep_not_refused():
    assert build.translate_file(CUDA / "nanosleep.cu").report("backoff_sum").status == "ok"


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128])
def test_backoff_loop_runs(cuda_module, block):
    m = cuda_module("nanosleep")
    n = 333
    x = torch.randn(n)
    y = torch.full((n,), float("nan"))
    m.backoff_sum[(n + block - 1) // block, block](x, y, n)
    torch.testing.assert_close(y, ((x + x) + x) + x, rtol=0, atol=0)
