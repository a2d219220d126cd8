"""The triton Backend record, selection with it, and its refusals (l0: no kernel runs).

In this process TRITON_INTERPRET is unset (interpreter numerics run in a subprocess:
test_interpreter.py), so on this CPU-only machine the backend must refuse, naming why.
"""

import os

import pytest
import torch

import xvendor
from xvendor import devices, registry

pytestmark = pytest.mark.l0

ROCM = ("gfx942", "gfx950", "gfx1250")


def test_record():
    b = registry.backends()["triton"]
    assert b.module == "xvendor.triton.backend" and b.probe == "xvendor.triton.backend:probe"
    assert b.ops == {"gemm", "grouped_mm"} and b.device_types == {"cuda"}
    assert b.explicit_device_types == {"cpu"}
    assert b.dtypes == {torch.float32, torch.float16, torch.bfloat16}
    assert "ROCm" in b.evidence and "cuBLAS" in b.evidence


@pytest.mark.parametrize("arch", ROCM + ("sm_90", "sm_100"))
def test_default_only_for_grouped_mm_on_rocm(arch, monkeypatch):
    # Pretend the probe passed (it needs a GPU or the interpreter) to see the policy itself.
    monkeypatch.setitem(registry._registry.unavailable, "triton", None)
    info = devices.hypothetical(arch)
    g = registry.select("grouped_mm", info, torch.bfloat16)
    m = registry.select("gemm", info, torch.bfloat16)
    g_chain, m_chain = (g.backend,) + g.fallbacks, (m.backend,) + m.fallbacks
    assert "triton" not in m_chain, str(m)  # cuBLAS / hipBLASLt stay the GEMM default
    assert "not the default" in m.passed_over["triton"]
    if arch in ROCM:  # chosen before the reference (a FlyDSL default may come first)
        assert "triton" in g_chain and g_chain.index("triton") < g_chain.index("aten"), str(g)
        if g.backend == "triton":
            assert "torch PR 194032" in g.reason
    else:
        assert "triton" not in g_chain, str(g)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
                    or torch.cuda.is_available(), reason="needs a CPU-only, non-interpreter run")
def test_explicit_request_on_cpu_names_the_fix():
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    with pytest.raises(xvendor.BackendUnavailable, match="TRITON_INTERPRET=1"):
        xvendor.gemm(a, b, backend="triton")
    # an automatic choice never picks it here, and the op still works
    assert torch.allclose(xvendor.gemm(a, b), a @ b)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
                    reason="the interpreter is on in this process")
def test_cpu_kernel_refuses_without_interpreter():
    from xvendor.triton import backend
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        backend.gemm(torch.randn(4, 3), torch.randn(3, 5))


def test_bf16_upcast_only_under_the_interpreter():
    from xvendor.triton import backend, configs
    cfg = configs.DEFAULTS["gfx950"]["gemm"]
    assert backend._meta(cfg, None, torch.bfloat16)["UPCAST"] is True
    assert backend._meta(cfg, None, torch.float16)["UPCAST"] is False
    compiled = backend._meta(cfg, "hip", torch.bfloat16)
    assert compiled["UPCAST"] is False and compiled["waves_per_eu"] == cfg.waves_per_eu
    assert compiled["PRECISION"] == "ieee"
