"""tests/port/cuda/async_copy.cu: ``cuda::memcpy_async`` with a block-scope ``cuda::barrier``
(``init``, ``arrive_and_wait``, ``wait(arrive())``, ``cuda::aligned_size_t``), its
whole-group form, and ``cooperative_groups::memcpy_async`` + ``cg::wait`` translate, the copy
done at the call (NOTE [synchronous async copies]). Before, every ``memcpy_async`` was
refused. A ``cuda::pipeline`` stays refused, naming pipelines."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA

TILE = 64


@pytest.mark.l0
def test_barrier_copies_translate_pipelines_refused():
    t = build.translate_file(CUDA / "async_copy.cu")
    assert t.report("tile_sums").status == "ok", t.report("tile_sums").reason
    piped = t.report("piped")
    assert piped.status == "unsupported" and "pipeline" in piped.reason


@pytest.mark.l1
@pytest.mark.parametrize("n,block", [(300, 32), (128, 64), (70, 16)])
def test_tile_sums(cuda_module, n, block):
    m = cuda_module("async_copy")
    x = torch.rand(n) + 0.25
    blocks = (n + TILE - 1) // TILE
    out = torch.full((blocks,), float("nan"))
    m.tile_sums[blocks, block](x, out, n)
    padded = torch.zeros(blocks * TILE, dtype=torch.float64)
    padded[:n] = x.double()
    tiles = padded.view(blocks, TILE).flip(1)  # a[TILE - 1 - i] = x[base + i]
    ref = (tiles * torch.arange(1, TILE + 1, dtype=torch.float64)).sum(1)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
