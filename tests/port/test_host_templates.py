"""tests/port/cuda/host_templates.cu and printf_clock.cu: template arguments found only
through host templates (a switch in a host template, its caller bound by an explicit
instantiation or an explicit call), eager and deferred instantiations, include guards,
``#ifdef __CUDACC__`` qualifiers, using-directives of dropped host headers, ``extern "C"``
kernels; device printf and clock()/clock64(). Numerics against float64 torch references,
outputs poisoned first."""

import pytest
import torch

from xvendor.port import build, instantiate

from .conftest import CUDA

SRC = CUDA / "host_templates.cu"


@pytest.mark.l0
def test_instantiations_through_host_templates():
    t = build.translate_file(SRC)
    rep = t.report("block_sum")
    assert rep.status == "ok"
    assert sorted(i.args for i in rep.instantiations) == [
        ["double", "128"], ["double", "64"], ["float", "128"], ["float", "64"]]
    assert t.report("scale_c").status == "ok" and "scale_c__xv_body" in t.source
    assert "twice" in t.source and "chrono" not in t.source.split("xvendor_cuda_compat_more.h")[1]


@pytest.mark.l0
def test_eager_instantiations_cover_every_value_then_defer(monkeypatch):
    found = [["int", "512"], ["float", "512"], ["int", "256"], ["float", "256"], ["int", "64"]]
    monkeypatch.setattr(instantiate, "MAX_EAGER", 3)
    now, later = instantiate.eager(found, [])
    assert now == [["int", "512"], ["float", "512"], ["int", "256"]]
    assert later == [["float", "256"], ["int", "64"]]
    now, later = instantiate.eager(found, [["int", "64"]])  # a requested one is always built
    assert ["int", "64"] in now and len(now) == 4


@pytest.fixture(scope="module")
def ht(sycl_device):
    import xvendor.port
    return xvendor.port.load(SRC)


@pytest.mark.l1
@pytest.mark.parametrize("spec,dtype,block", [("block_sum<float, 128>", torch.float32, 128),
                                              ("block_sum<double, 64>", torch.float64, 64)])
def test_block_sum_instantiated_through_host_templates(ht, spec, dtype, block):
    n = 1000
    grid = (n + block - 1) // block
    x = torch.randn(n, dtype=dtype, generator=torch.Generator().manual_seed(block))
    out = torch.full((grid,), float("nan"), dtype=dtype)
    ht[spec][grid, block](x, out, n)
    want = torch.nn.functional.pad(2 * x.float().double(), (0, grid * block - n)).view(grid, block).sum(1)
    torch.testing.assert_close(out.double(), want, atol=1e-4, rtol=1e-5)


@pytest.mark.l1
def test_extern_c_kernel(ht):
    y = torch.randn(300)
    want = 1.5 * y.double()
    ht.scale_c[3, 128](y, 1.5, 300)
    torch.testing.assert_close(y.double(), want)


@pytest.mark.l1
def test_device_printf_and_clock(sycl_device, capfd):
    import xvendor.port
    m = xvendor.port.load(CUDA / "printf_clock.cu")
    assert {k.name: k.status for k in m.translation.kernels} == {"report": "ok", "timed": "ok"}
    x = torch.arange(40, dtype=torch.float32) + 0.25
    y = torch.full((40,), float("nan"))
    m["report"][2, 32](x, y, 40)
    torch.testing.assert_close(y, 3 * x)
    out = capfd.readouterr().out
    assert "report n=40 x0=0.25 done" in out and "second line" in out
    ticks = torch.zeros(40, dtype=torch.int64)
    m.timed[2, 32](x, y, ticks, 40)
    assert bool((ticks == 1).all())
    idx = (torch.arange(40)[:, None] + torch.arange(64)[None, :]) % 40
    torch.testing.assert_close(y.double(), x.double()[idx].sum(1), atol=1e-4, rtol=1e-5)
