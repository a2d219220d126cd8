"""tests/port/cuda/extension_union.cu: an ``__extension__``-or-nothing macro before a union
member no longer loses the union (the SYCL source failed its own static_assert on the
struct's size), and the kernel reads the union's fields."""

import numpy as np
import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_extension_macro_keeps_the_union():
    t = build.translate_file(CUDA / "extension_union.cu")
    assert t.report("block_scale").status == "ok"
    body = t.source[t.source.index("typedef struct"):t.source.index("} block_dm;")]
    assert "half2 dm;" in body and "half m;" in body


@pytest.mark.l1
def test_union_fields_read(cuda_module):
    m = cuda_module("extension_union")
    n = 8
    blocks = np.zeros(n, dtype=[("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)])
    blocks["d"] = np.arange(n) * 0.5
    blocks["m"] = -1.0
    blocks["qs"][:, 0] = np.arange(n) + 1
    raw = torch.from_numpy(blocks.view(np.uint8).copy())
    y = torch.full((n,), float("nan"))
    m.block_scale[1, 32](raw, y, n)
    ref = torch.from_numpy(np.arange(n) * 0.5 * (np.arange(n) + 1) - 1.0).float()
    torch.testing.assert_close(y, ref)
