"""tests/port/cuda/aten_half.cu: ATen's Half is its own type with its bits in ``.x``
(NOTE [c10::Half]): AT_DISPATCH_*_AND_HALF binds scalar_t to ``c10::Half``, the overload
taking ``at::Half`` is the one called and may CAS on the raw bits of the 32-bit word that
holds the value; ``std::numeric_limits<at::Half>`` and mixed arithmetic behave as ATen's.
Before, at::Half was CUDA's ``__half`` (sycl::half): 'no member named 'x''."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_dispatch_binds_aten_half():
    t = build.translate_file(CUDA / "aten_half.cu")
    for k in ("bin_add", "row_max"):
        rep = t.report(k)
        found = [i.args for i in rep.instantiations] + [list(a) for a in rep.deferred]
        assert sorted(found) == [["c10::Half"], ["double"], ["float"]], (k, found)


@pytest.mark.l1
@pytest.mark.parametrize("n,nbins", [(500, 7), (64, 1), (1000, 33)])
def test_half_bits_cas_add(cuda_module, n, nbins):
    m = cuda_module("aten_half")
    # multiples of 1/8 in [-4, 4): every partial sum is exact in fp16, whatever the order
    x = (torch.randint(-32, 32, (n,)).double() / 8).masked_fill_(torch.rand(n) < 0.1, 0.125)
    bin_ = torch.randint(0, nbins, (n,))
    ref = torch.zeros(nbins, dtype=torch.float64).index_add_(0, bin_, x)
    for dtype, kname in ((torch.float16, "bin_add<c10::Half>"), (torch.float32, "bin_add<float>")):
        out = torch.zeros(nbins, dtype=dtype)  # the kernel accumulates into it
        m[kname][(n + 127) // 128, 128](x.to(dtype), bin_, out, n)
        torch.testing.assert_close(out.double(), ref, rtol=0, atol=0)


@pytest.mark.l1
@pytest.mark.parametrize("rows,cols", [(70, 9), (3, 1)])
def test_half_limits_and_arithmetic(cuda_module, rows, cols):
    m = cuda_module("aten_half")
    x = (torch.randint(-400, 400, (rows, cols)).double() / 16 - 40)  # all below zero: lowest() matters
    out = torch.full((rows,), float("nan"), dtype=torch.float16)
    m["row_max<c10::Half>"][(rows + 63) // 64, 64](x.half(), out, rows, cols)
    ref = x.max(1).values * 2 - 0.5
    torch.testing.assert_close(out.double(), ref.half().double(), rtol=0, atol=0)
