"""tests/port/cuda/shared_alignas.cu: ``__shared__ alignas(16) float a[N]`` (and
``__align__(16)``): the alignment goes on the work_group_static variable, not inside its
template argument ('expected expression'); float4 reads of the array see the right data and
the arrays are 16-byte aligned."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_alignment_outside_the_template_argument():
    src = build.translate_file(CUDA / "shared_alignas.cu").source
    assert "work_group_static<float[64]> tile__xv_wgs" in src
    assert "alignas(alignof(float4)) static syclex::work_group_static" in src


@pytest.mark.l1
def test_reverse4(cuda_module):
    m = cuda_module("shared_alignas")
    blocks = 3
    x = torch.randn(blocks * 64)
    y = torch.full((blocks * 64,), float("nan"))
    mis = torch.full((blocks,), 99, dtype=torch.int64)
    m.reverse4[blocks, 64](x, y, mis)
    xb = x.view(blocks, 64)
    ref = xb.flip(1) + 2.0 * xb
    torch.testing.assert_close(y.view(blocks, 64), ref, rtol=0, atol=0)
    assert mis.tolist() == [0] * blocks
