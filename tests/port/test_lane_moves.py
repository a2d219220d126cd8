"""tests/port/cuda/lane_moves.cu: cuda_fp16.h / cuda_bf16.h lane moves (``__lowhigh2highlow``,
``__low2half2`` / ``__high2half2``, ``__low2bfloat16``..., ``__float22half2_rn``). Before,
each kernel using one was a compile error ("use of undeclared identifier
'__lowhigh2highlow'": exllamav2's rotary-embedding kernels)."""

import pytest
import torch


def _half2(x, y, n):
    return [x.flip(1), x[:, :1].expand(n, 2), x[:, 1:].expand(n, 2),
            torch.stack([x[:, 0], y[:, 0]], 1), y.flip(1)]


def _bf162(x, y, n):
    return [x.flip(1), x[:, :1].expand(n, 2), x[:, 1:].expand(n, 2),
            torch.stack([x[:, 1], y[:, 1]], 1), torch.stack([y[:, 1], x[:, 0]], 1),
            torch.stack([y[:, 0], x[:, 1]], 1)]


# kernel -> (element type, the expected lanes of each output pair, as the .cu writes them)
CASES = {"half2_lanes": (torch.half, _half2), "bf162_lanes": (torch.bfloat16, _bf162)}


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128])
@pytest.mark.parametrize("kernel", sorted(CASES))
def test_lane_moves_are_exact(cuda_module, kernel, block):
    dtype, expected = CASES[kernel]
    n = 257
    g = torch.Generator().manual_seed(block)
    x = (torch.randn(n, 2, generator=g) * 3).to(dtype)
    y = (torch.randn(n, 2, generator=g) * 3).to(dtype)
    want = torch.stack(expected(x, y, n), 1)
    out = torch.full_like(want, float("nan"))
    getattr(cuda_module("lane_moves"), kernel)[(n + block - 1) // block, block](x, y, out, n)
    assert torch.equal(out, want)
