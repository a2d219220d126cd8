"""tests/port/cuda/volatile_shared.cu: ``volatile __shared__ float buf[N]`` (and a volatile
shared scalar) compiles: the ``work_group_static`` storage is plain and the name a volatile
reference to it (``work_group_static<volatile float[N]>`` was a compile error)."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_storage_plain_reference_volatile():
    src = build.translate_file(CUDA / "volatile_shared.cu").source
    assert "work_group_static<float[BS]>" in src and "volatile float (&buf)[BS]" in src
    assert "work_group_static<volatile" not in src


@pytest.mark.l1
@pytest.mark.parametrize("n", [64, 1000])
def test_block_sums(cuda_module, n):
    m = cuda_module("volatile_shared")
    x = torch.randn(n, dtype=torch.float64).float()
    blocks = (n + 63) // 64
    out = torch.full((blocks,), float("nan"))
    m.block_sums[blocks, 64](x, out, n)
    xd = torch.nn.functional.pad(x.double(), (0, blocks * 64 - n)).view(blocks, 64)
    counts = torch.clamp(n - 64 * torch.arange(blocks), max=64).double()
    torch.testing.assert_close(out.double(), xd.sum(1) + 1000 * counts, rtol=1e-5, atol=1e-4)
