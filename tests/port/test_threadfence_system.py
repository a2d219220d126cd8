"""tests/port/cuda/threadfence_system.cu: ``__threadfence_system`` (a system-scope fence)
translates (was 'undeclared identifier': ggml's allreduce kernel)."""

import pytest
import torch


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64])
def test_publish_with_system_fence(cuda_module, block):
    m = cuda_module("threadfence_system")
    n = 100
    x = torch.randn(n)
    data = torch.full((n,), float("nan"))
    flags = torch.zeros(n, dtype=torch.int32)
    m.publish[(n + block - 1) // block, block](x, data, flags, n)
    torch.testing.assert_close(data, 2 * x + 1, rtol=0, atol=0)
    assert bool((flags == 1).all())
