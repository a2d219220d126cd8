"""l2: the SYCL kernels on a real Intel GPU (torch XPU build), through the dispatch layer,
against the fp64 oracle. Skipped with a reason elsewhere."""

import pytest
import torch

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l2
HAS_XPU = hasattr(torch, "xpu") and torch.xpu.is_available()
needs_xpu = pytest.mark.skipif(not HAS_XPU, reason=f"no Intel XPU device (torch {torch.__version__} "
                                                   "has no XPU or none is present)")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@needs_xpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm(gen, dtype):
    a, b, c = (torch.randn(*s, generator=gen).to(dtype) for s in [(200, 130), (130, 70), (70,)])
    out = xvendor.gemm(a.to("xpu"), b.to("xpu"), c.to("xpu"), backend="sycl").cpu()
    assert oracle.rel_error(out, oracle.gemm(a, b, c)) <= oracle.TOLERANCE[dtype]


@needs_xpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_mm_2d3d(gen, dtype):
    x, w = torch.randn(60, 32, generator=gen).to(dtype), torch.randn(3, 32, 24, generator=gen).to(dtype)
    offs = oracle.random_offs([20, 0, 31])
    out = xvendor.grouped_mm(x.to("xpu"), w.to("xpu"), offs.to("xpu"), backend="sycl").cpu()
    assert oracle.rel_error(out, oracle.grouped_mm(x, w, offs)) <= oracle.TOLERANCE[dtype]


@needs_xpu
def test_rms_norm_and_topk(gen):
    x, w = torch.randn(16, 300, generator=gen), torch.randn(300, generator=gen)
    out = xvendor.rms_norm(x.to("xpu"), w.to("xpu"), 1e-6, backend="sycl").cpu()
    assert oracle.rel_error(out, oracle.rms_norm(x, w, 1e-6)) <= oracle.TOLERANCE[torch.float32]
    values, _ = xvendor.topk(x.to("xpu"), 5, backend="sycl")
    assert torch.equal(values.cpu().double(), oracle.topk_values(x, 5))


@needs_xpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_vocabulary_rows_with_ties_and_nan(gen, dtype, largest):
    """The radix select's work-group local histogram and global-memory bitonic sort on a GPU:
    ties (lowest index first) and NaN (the greatest value) as on the CPU device."""
    x = torch.randint(-50, 50, (3, 40_000), generator=gen).to(dtype)
    x[:, ::97] = float("nan")
    values, indices = xvendor.topk(x.to("xpu"), 1500, largest=largest, backend="sycl")
    want_v, want_i = torch.sort(x, descending=largest, stable=True)
    assert torch.equal(indices.cpu(), want_i[:, :1500])
    assert torch.equal(values.cpu().nan_to_num(), want_v[:, :1500].nan_to_num())
