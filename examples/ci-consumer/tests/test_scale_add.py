import pytest
import torch
from torch.library import opcheck

from consumer_ops import scale_add


@pytest.mark.l0
def test_scale_add_on_every_device(device):
    x, y = torch.randn(7, 5, device=device), torch.randn(7, 5, device=device)
    torch.testing.assert_close(scale_add(x, y, 2.0), x * 2.0 + y)


@pytest.mark.l0
def test_opcheck():
    opcheck(torch.ops.consumer.scale_add.default, (torch.randn(3, 4), torch.randn(3, 4), 0.5))


@pytest.mark.l1
@pytest.mark.requires_toolchain("triton")
def test_the_triton_kernel_cross_compiles_for_gfx950(tmp_path):
    from consumer_kernels import compile_for
    report = compile_for(["gfx950"], tmp_path)
    assert report["gfx950"]["global_loads"]
    assert "v_fma" in (tmp_path / "scale_add.gfx950.s").read_text()  # x * alpha + y, fused


@pytest.mark.l2
@pytest.mark.requires_vendor("amd")
def test_on_an_amd_gpu():
    x = torch.randn(4, device="cuda")
    torch.testing.assert_close(scale_add(x, x, 1.0), 2 * x)


@pytest.mark.l0
@pytest.mark.requires_arch("gfx950")
def test_gfx950_only_logic():
    from xvendor import devices
    assert devices.ARCHS["gfx950"].lds_bytes == 160 * 1024
