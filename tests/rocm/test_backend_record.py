"""The flydsl backend record, its probe and the dispatch it produces (l0: no compiler runs)."""

import pytest
import torch

from xvendor import devices, registry
from xvendor.rocm import backend, configs

pytestmark = pytest.mark.l0


def test_record_defaults_only_where_there_is_evidence():
    rec = registry.backends()["flydsl"]
    assert rec.archs == {"gfx950", "gfx1250"} and rec.vendors == {"amd"}
    assert rec.ops == {"gemm", "grouped_mm"} and rec.dtypes == {torch.bfloat16, torch.float16}
    assert rec.defaults == {"gemm": {"gfx950"}, "grouped_mm": {"gfx950"}}  # none on gfx1250
    assert "190903" in rec.evidence and "194032" in rec.evidence
    assert rec.gate_identity == "xvendor.rocm.backend:gate_identity"


def test_probe_says_plainly_why_not_here():
    why = backend.probe()
    if torch.version.hip and torch.cuda.is_available():
        pytest.skip("a ROCm build with a device: the probe may pass")
    assert why and ("no ROCm device" in why or "not gfx950 or gfx1250" in why
                    or "flydsl" in why)


@pytest.mark.parametrize("arch, op, first, rest", [
    ("gfx950", "grouped_mm", "flydsl", ("triton", "aten")),
    ("gfx950", "gemm", "flydsl", ("aten",)),
    ("gfx1250", "grouped_mm", "triton", ("aten",)),  # no public FlyDSL numbers on gfx1250
    ("gfx1250", "gemm", "aten", ()),
])
def test_dry_run_dispatch(monkeypatch, arch, op, first, rest):
    monkeypatch.setattr(registry._registry, "unavailable", {"flydsl": None, "triton": None})
    dec = registry.select(op, devices.hypothetical(arch), torch.bfloat16)
    assert (dec.backend, dec.fallbacks) == (first, rest)


def test_gate_identity_names_template_config_and_version():
    info = devices.hypothetical("gfx950")
    ident = backend.gate_identity("grouped_mm", info, torch.bfloat16)
    assert ident.startswith(f"grouped_mm/{configs.default('gfx950', 'grouped_mm').name}/flydsl-")


def test_config_spaces_are_data_and_big_enough():
    for arch in configs.TARGETS:
        for t in configs.TEMPLATES:
            space = configs.SPACES[arch][t]
            assert len(set(space)) >= 12 and configs.DEFAULTS[arch][t] in space
            lds = devices.ARCHS[arch].lds_bytes
            mod = __import__(f"xvendor.rocm.gemm_{arch}", fromlist=["x"])
            for c in space:
                assert c.block_m % (c.warps_m * c.mma) == 0 and c.block_n % (c.warps_n * c.mma) == 0
                need = mod.lds_bytes(c) if hasattr(mod, "lds_bytes") else c.lds_bytes()
                assert need <= lds, (arch, c.name, need)
