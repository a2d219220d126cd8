"""The triton Backend record, selection with it, and its refusals (l0: no kernel runs).

In this process TRITON_INTERPRET is unset (interpreter numerics run in a subprocess:
test_interpreter.py), so on this CPU-only machine the backend must refuse, naming why.
State is changed only through the registry's public API (``register``, ``reset``).
"""

import dataclasses
import os

import pytest
import torch

import xvendor
from xvendor import devices, ops, registry

pytestmark = pytest.mark.l0

ROCM = ("gfx942", "gfx950", "gfx1250")


@pytest.fixture
def probe_passes():
    """The triton record with its probe dropped (it needs a GPU or the interpreter), so a
    test sees the selection policy itself; the original record is put back afterwards."""
    original = registry.backends()["triton"]
    registry.register(dataclasses.replace(original, probe=None), replace=True)
    yield
    registry.register(original, replace=True)
    registry.reset()


def test_record():
    b = registry.backends()["triton"]
    assert b.module == "xvendor.triton.backend" and b.probe == "xvendor.triton.backend:probe"
    assert b.tunable == "xvendor.triton.tunable:TUNABLE"
    assert b.ops == {"gemm", "grouped_mm", "scaled_mm", "scaled_grouped_mm"} and b.device_types == {"cuda"}
    assert b.explicit_device_types == {"cpu"}
    assert b.dtypes == {torch.float32, torch.float16, torch.bfloat16}
    assert "ROCm" in b.evidence and "cuBLAS" in b.evidence


def test_tunable_lives_above_the_backend():
    from xvendor.triton import backend
    assert not hasattr(backend, "TUNABLE")
    t = registry.tunable("triton")
    assert callable(t.candidates) and callable(t.run)


@pytest.mark.parametrize("arch", ROCM + ("sm_90", "sm_100"))
def test_default_only_for_grouped_mm_on_rocm(arch, probe_passes):
    assert {"gemm", "grouped_mm"} <= set(registry.ops()), ops  # xvendor.ops defines them
    info = devices.hypothetical(arch)
    g = registry.select("grouped_mm", info, torch.bfloat16)
    m = registry.select("gemm", info, torch.bfloat16)
    g_chain, m_chain = (g.backend,) + g.fallbacks, (m.backend,) + m.fallbacks
    assert "triton" not in m_chain, str(m)  # cuBLAS / hipBLASLt stay the GEMM default
    assert "not the default" in m.passed_over["triton"]
    if arch in ROCM:  # chosen before the reference (a FlyDSL default may come first)
        assert "triton" in g_chain and g_chain.index("triton") < g_chain.index("torch"), str(g)
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
@pytest.mark.parametrize("config", [None, {"block_m": 64, "block_n": 64, "block_k": 64}])
def test_cpu_kernel_refuses_without_interpreter(config):
    from xvendor.triton import backend
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        backend.gemm(torch.randn(4, 3), torch.randn(3, 5), config=config)


def test_bf16_upcast_only_under_the_interpreter():
    from xvendor.triton import configs, launch
    cfg = configs.DEFAULTS["gfx950"]["gemm"]
    assert launch._meta(cfg, None, torch.bfloat16)["UPCAST"] is True
    assert launch._meta(cfg, None, torch.float16)["UPCAST"] is False
    compiled = launch._meta(cfg, "hip", torch.bfloat16)
    assert compiled["UPCAST"] is False and compiled["waves_per_eu"] == cfg.waves_per_eu
    assert compiled["PRECISION"] == "ieee"


def _meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.mark.parametrize("arch", ("gfx950", "sm_90"))
def test_launch_builders_take_the_config_they_are_given(arch):
    # A tuned config arrives as Config.to_dict(); the grid and the compile options follow it.
    pytest.importorskip("triton")
    from xvendor.triton import configs, launch
    kind = configs.TARGETS[arch][0]
    for cfg in configs.SPACES[arch]["gemm"][:4]:
        rebuilt = launch.resolve_config(cfg.to_dict())
        assert rebuilt == cfg and launch.resolve_config(cfg) is cfg
        a, b, out = _meta(1000, 512), _meta(512, 700), _meta(1000, 700)
        _, grid, _, kwargs = launch.gemm_launch(a, b, None, out, rebuilt, kind)
        assert grid == (-(-1000 // cfg.block_m) * -(-700 // cfg.block_n),)
        assert kwargs["BLOCK_K"] == cfg.block_k and kwargs["num_stages"] == cfg.num_stages
        a, w, offs = _meta(1000, 512), _meta(4, 512, 700), _meta(4, dtype=torch.int32)
        out = _meta(*launch.grouped_out_shape(a, w, offs))
        _, grid, _, kwargs = launch.grouped_mm_launch(a, w, offs, None, out, rebuilt, kind,
                                                      programs=10**6)
        bound = (-(-1000 // cfg.block_m) + 4 + 1) * -(-700 // cfg.block_n)  # + partial + tail
        assert grid == (bound,) and kwargs["GROUP_M"] == cfg.group_m
