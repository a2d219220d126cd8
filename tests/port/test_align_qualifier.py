"""tests/port/cuda/align_qualifier.cu: ``__align__(n)`` after ``const`` and before the type
(``const __align__(16) half2 zero[n]``, as ggml's fattn kernels write it) compiles: it is
GNU ``aligned`` as in nvcc (``alignas`` there was "cannot be applied to types"), and
aligns (``(size_t) tmp % 16 == 0``, ``alignof(pair_f) == 8``)."""

import pytest
import torch


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64])
def test_aligned_locals(cuda_module, block):
    m = cuda_module("align_qualifier")
    n = 100
    x = torch.randn(n)
    y = torch.full((n,), float("nan"))
    m.aligned_locals[(n + block - 1) // block, block](x, y, n)
    ref = ((x * 1 + x * 2) + (x * 3 + x * 4)) + 8
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
