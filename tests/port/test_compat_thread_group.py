"""tests/port/cuda/thread_group.cu: ``cooperative_groups::thread_group`` (a block or a tile
behind one type) and ``tiled_partition(g, n)`` in the compat header; before, a device
function taking a ``thread_group`` did not compile ('no matching function')."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_translates():
    assert build.translate_file(CUDA / "thread_group.cu").report("sums").status == "ok"


@pytest.mark.l1
@pytest.mark.parametrize("block", [64, 256])
def test_group_sums(cuda_module, block):
    m = cuda_module("thread_group")
    blocks = 5
    x = torch.randint(-1000, 1000, (blocks * block,), dtype=torch.int32)
    b = torch.full((blocks,), -7, dtype=torch.int32)
    t16 = torch.full((blocks * block // 16,), -7, dtype=torch.int32)
    t8 = torch.full((blocks * block // 8,), -7, dtype=torch.int32)
    m.sums[blocks, block, block * 4](x, b, t16, t8)
    assert torch.equal(b, x.view(blocks, block).sum(1, dtype=torch.int32))
    assert torch.equal(t16, x.view(-1, 16).sum(1, dtype=torch.int32))
    assert torch.equal(t8, x.view(-1, 8).sum(1, dtype=torch.int32))
