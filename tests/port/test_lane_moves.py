"""tests/port/cuda/lane_moves.cu: cuda_fp16.h / cuda_bf16.h lane moves (``__lowhigh2highlow``,
``__low2half2`` / ``__high2half2``, ``__low2bfloat16``..., ``__float22half2_rn``). Before,
each kernel using one was a compile error ("use of undeclared identifier
'__lowhigh2highlow'": exllamav2's rotary-embedding kernels)."""

import pytest
import torch


def _pairs(dtype, n, seed):
    g = torch.Generator().manual_seed(seed)
    return ((torch.randn(n, 2, generator=g) * 3).to(dtype),
            (torch.randn(n, 2, generator=g) * 3).to(dtype))


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128])
def test_half2_lane_moves(cuda_module, block):
    m = cuda_module("lane_moves")
    n = 257
    x, y = _pairs(torch.half, n, block)
    out = torch.full((n, 5, 2), float("nan"), dtype=torch.half)
    m.half2_lanes[(n + block - 1) // block, block](x, y, out, n)
    want = torch.stack([x.flip(1), x[:, :1].expand(n, 2), x[:, 1:].expand(n, 2),
                        torch.stack([x[:, 0], y[:, 0]], 1), y.flip(1)], 1)
    assert torch.equal(out, want)


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128])
def test_bfloat162_lane_moves(cuda_module, block):
    m = cuda_module("lane_moves")
    n = 257
    x, y = _pairs(torch.bfloat16, n, block)
    out = torch.full((n, 6, 2), float("nan"), dtype=torch.bfloat16)
    m.bf162_lanes[(n + block - 1) // block, block](x, y, out, n)
    want = torch.stack([x.flip(1), x[:, :1].expand(n, 2), x[:, 1:].expand(n, 2),
                        torch.stack([x[:, 1], y[:, 1]], 1),
                        torch.stack([y[:, 1], x[:, 0]], 1),
                        torch.stack([y[:, 0], x[:, 1]], 1)], 1)
    assert torch.equal(out, want)
