"""l2: the tuning loop on a real GPU with the Triton backend (skipped without one)."""

import pytest
import torch

from xvendor import devices, registry
from xvendor.tuning import serve, tuner
from xvendor.tuning.problem import key_for

pytestmark = pytest.mark.l2

GPUS = [d for d in devices.present_devices() if d.type == "cuda"]


@pytest.mark.skipif(not GPUS, reason="no CUDA or ROCm GPU: GPU tuning needs one")
def test_tune_triton_gemm_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    registry.reset()
    info = registry.device_info(GPUS[0])
    gen = torch.Generator().manual_seed(0)
    argsets = [(torch.randn(2048, 2048, generator=gen).to(GPUS[0], torch.bfloat16),
                torch.randn(2048, 2048, generator=gen).to(GPUS[0], torch.bfloat16), None, None)
               for _ in range(3)]
    key = key_for("gemm", "*", info.arch, info.cu_count, info.product, argsets[0])
    res = tuner.tune("gemm", "triton", registry.tunable("triton"), info, key, argsets, serve.store_for(info),
                     top_k=4)
    assert res.winner is not None and res.winner.measured_us > 0
    assert sum(r.status == "timed" for r in res.rows) >= 2
    print(f"triton gemm 2048^3 bf16 on {info.product}: winner {res.winner.name} "
          f"{res.winner.measured_us:.1f} us, ATen {res.aten_us:.1f} us, rho {res.rank_correlation:.2f}")
