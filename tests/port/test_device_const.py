"""tests/port/cuda/device_const.cu: ``__device__ const`` globals with initializers are read
by kernels as plain const globals (they were refused as symbols the host must set), and the
kernel reading them computes what the CUDA code does."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_device_const_global_is_not_refused():
    t = build.translate_file(CUDA / "device_const.cu")
    assert t.report("cubic_weight").status == "ok", t.report("cubic_weight").reason
    assert "__device__ const float a" not in t.source


@pytest.mark.l1
def test_device_const_global_reads(cuda_module):
    m = cuda_module("device_const")
    n = 100
    x = torch.rand(n, generator=torch.Generator().manual_seed(11))
    y = torch.full((n,), float("nan"))
    m.cubic_weight[(n + 31) // 32, 32](x, y, n)
    a = -0.75
    ref = ((a + 2) * x.double() - (a + 3)) * x.double() ** 2 + 1
    ref = ref * torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64).repeat(n // 3 + 1)[:n]
    torch.testing.assert_close(y, ref.float())


@pytest.mark.l0
def test_unwritten_device_global_is_const_written_one_is_not():
    t = build.translate_file(CUDA / "device_const.cu")
    assert t.report("pair_sum").status == "ok", t.report("pair_sum").reason
    assert t.report("bump").status == "unsupported" and "counter" in t.report("bump").reason


@pytest.mark.l1
def test_unwritten_device_global_reads(cuda_module):
    m = cuda_module("device_const")
    n = 40
    x = torch.randn(n, generator=torch.Generator().manual_seed(2))
    y = torch.full((n,), float("nan"))
    m.pair_sum[1, 64](x, y, n)
    a, b = torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])
    idx = torch.arange(n) % 3
    torch.testing.assert_close(y, x[a[idx]] + x[b[idx]])
