"""l2: every op through the dispatch layer on each real accelerator present (CUDA, ROCm,
XPU), against the fp64 oracle, plus opcheck there. Skipped with a reason elsewhere."""

import pytest
import torch
from torch.library import opcheck

from xvendor import devices, selfcheck

pytestmark = pytest.mark.l2

ACCELERATORS = [d for d in devices.present_devices() if d.type != "cpu"]
needs_accelerator = pytest.mark.skipif(
    not ACCELERATORS, reason="no CUDA, ROCm or XPU device in this process "
                             f"(torch {torch.__version__}, cuda={torch.version.cuda}, hip={torch.version.hip})")


@needs_accelerator
@pytest.mark.parametrize("device", [str(d) for d in ACCELERATORS] or ["none"])
def test_selfcheck_on_device(device):
    bad = [r for r in selfcheck.run(torch.device(device)) if not r.ok]
    assert not bad, bad


@needs_accelerator
@pytest.mark.parametrize("device", [str(d) for d in ACCELERATORS] or ["none"])
def test_opcheck_on_device(device):
    a = torch.randn(33, 16, device=device, requires_grad=True)
    w = torch.randn(3, 16, 8, device=device, requires_grad=True)
    offs = torch.tensor([10, 10, 30], dtype=torch.int32, device=device)
    opcheck(torch.ops.xvendor.grouped_mm.default, (a, w, offs))
    opcheck(torch.ops.xvendor.gemm.default, (a, w[0]))
    opcheck(torch.ops.xvendor.rms_norm.default, (a, torch.randn(16, device=device)))
    opcheck(torch.ops.xvendor.topk.default, (a, 4))


@needs_accelerator
def test_device_detection_names_an_exact_arch():
    info = devices.detect(ACCELERATORS[0])
    assert info.vendor in ("amd", "nvidia", "intel") and info.arch and ":" not in info.arch
