"""tests/port/cuda/simd_bytes.cu: ``__vsub4`` (wrapping), ``__vsubss4`` (signed, saturated)
and ``__vcmpne4`` per byte, against a numpy reference on edge values (-128, 127, 0)."""

import numpy as np
import pytest
import torch


@pytest.mark.l1
def test_per_byte_intrinsics(cuda_module):
    m = cuda_module("simd_bytes")
    rng = np.random.default_rng(3)
    a8 = rng.integers(-128, 128, size=(64, 4)).astype(np.int8)
    b8 = rng.integers(-128, 128, size=(64, 4)).astype(np.int8)
    a8[:4] = [[127, -128, 0, 5]] * 4
    b8[:4] = [[-1, 1, 0, 5], [-128, 127, 1, 4], [0, 0, 0, 0], [127, -128, -128, 127]]
    n = len(a8)
    a = torch.from_numpy(a8.view(np.uint32).reshape(n).view(np.int32).copy())
    b = torch.from_numpy(b8.view(np.uint32).reshape(n).view(np.int32).copy())
    out = torch.zeros(3 * n, dtype=torch.int32)
    m.byte_ops[1, 64](a, b, out, n)
    got = out.numpy().view(np.uint32).reshape(n, 3)
    wide = a8.astype(np.int32) - b8.astype(np.int32)
    sub = (wide & 0xff).astype(np.uint8).view(np.uint32).reshape(n)
    subss = np.clip(wide, -128, 127).astype(np.int8).view(np.uint32).reshape(n)
    ne = np.where(a8 != b8, 0xff, 0).astype(np.uint8).view(np.uint32).reshape(n)
    assert (got[:, 0] == sub).all() and (got[:, 1] == subss).all() and (got[:, 2] == ne).all()
