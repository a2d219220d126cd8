"""tests/port/cuda/shared_attribute.cu: ``[[maybe_unused]] __shared__ float s[n];`` keeps its
attribute in front of the declaration; it went into the work_group_static template
argument ("expected variable name or 'this' in lambda capture list": ggml's mmvq)."""

import pytest
import torch


@pytest.mark.l1
@pytest.mark.parametrize("second", [True, False])
def test_shared_with_attribute(cuda_module, second):
    m = cuda_module("shared_attribute")
    n = 128
    x = torch.randn(n)
    y = torch.full((n,), float("nan"))
    m[f"block_reverse<{str(second).lower()}>"][n // 64, 64](x, y, n)
    ref = x.view(-1, 64).flip(1).reshape(-1) * (2 if second else 1)
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
