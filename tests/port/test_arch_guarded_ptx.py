"""tests/port/cuda/arch_guarded_ptx.cu: inline PTX under ``#if __CUDA_ARCH__ >= N``,
``#ifdef __CUDA_ARCH__`` or a feature macro defined only for an NVIDIA architecture is in
a branch the SYCL compile does not take: the kernel translates (with a lint saying so) and
runs the portable branch; PTX outside such a branch is still refused."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_dead_ptx_not_refused_live_ptx_refused():
    t = build.translate_file(CUDA / "arch_guarded_ptx.cu")
    rep = t.report("recip_lane")
    assert rep.status == "ok", rep.reason
    assert any("inline PTX" in x and "does not take" in x for x in rep.lints)
    scan = t.report("scan_or_copy")  # CUB in a dead branch: translated, with the lint
    assert scan.status == "ok" and any("library call" in x and "does not take" in x for x in scan.lints)
    live = t.report("live_ptx")
    assert live.status == "unsupported" and "PTX" in live.reason


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64])
def test_portable_branch_runs(cuda_module, block):
    m = cuda_module("arch_guarded_ptx")
    n = 200
    x = torch.rand(n) + 0.5
    y = torch.full((n,), float("nan"))
    lane = torch.full((n,), -1, dtype=torch.int32)
    m.recip_lane[(n + block - 1) // block, block](x, y, lane, n)
    torch.testing.assert_close(y, (1.0 / x.double()).float(), rtol=0, atol=0)
    assert torch.equal(lane, (torch.arange(n) % block % 32).int())
