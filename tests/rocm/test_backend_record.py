"""The flydsl backend record, its probe and the dispatch it produces (l0: no compiler runs)."""

import pytest
import torch

from xvendor import devices, registry
from xvendor.rocm import backend, configs

pytestmark = pytest.mark.l0


def test_record_defaults_only_where_there_is_evidence():
    rec = registry.backends()["flydsl"]
    assert rec.archs == {"gfx950", "gfx1250"} and rec.vendors == {"amd"}
    assert rec.ops == {"gemm", "grouped_mm", "rms_norm", "rms_norm_backward", "topk", "scaled_mm"}
    assert set(backend.KERNELS) == rec.ops
    assert rec.dtypes == {torch.bfloat16, torch.float16}
    assert rec.op_dtypes == {"topk": {torch.bfloat16, torch.float16, torch.float32},
                             "scaled_mm": {torch.bfloat16}}
    # rms_norm and topk: on request only (the public gfx950 numbers are for torch's own FlyDSL
    # kernels above shape gates, not for these kernels; nothing for gfx1250)
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
    ("gfx950", "grouped_mm", "flydsl", ("triton", "torch", "reference")),
    ("gfx950", "gemm", "flydsl", ("torch", "reference")),
    ("gfx1250", "grouped_mm", "triton", ("torch", "reference")),  # no public FlyDSL numbers on gfx1250
    ("gfx1250", "gemm", "torch", ("reference",)),
])
def test_dry_run_dispatch(arch, op, first, rest):
    import xvendor.ops  # noqa: F401 (defines the ops)
    dec = registry.select(op, devices.hypothetical(arch), torch.bfloat16, dry_run=True)
    assert (dec.backend, dec.fallbacks) == (first, rest)


def _bf16(*shape):
    return torch.randn(*shape).bfloat16()


def test_gate_identity_is_one_per_compiled_specialization():
    """Regression: the identity used to name only op/config/version, so a passing 2Dx3D
    forward call vouched for the 2Dx2D, bias and out_dtype specializations."""
    info = devices.hypothetical("gfx950")
    offs = torch.tensor([3, 8, 16], dtype=torch.int32)
    calls = {
        "2Dx3D": (_bf16(16, 64), _bf16(3, 64, 32), offs, None, None),
        "2Dx3D+bias": (_bf16(16, 64), _bf16(3, 64, 32), offs, _bf16(3, 32), None),
        "2Dx3D->fp32": (_bf16(16, 64), _bf16(3, 64, 32), offs, None, torch.float32),
        "2Dx2D": (_bf16(64, 16).t(), _bf16(16, 32), offs, None, None),
        "3Dx3D": (_bf16(3, 8, 64), _bf16(3, 64, 32), None, None, None),
    }
    idents = {name: backend.gate_identity("grouped_mm", info, torch.bfloat16, args, None)
              for name, args in calls.items()}
    assert len(set(idents.values())) == len(idents), idents
    default = configs.default("gfx950", "grouped_mm").name
    assert all(f"/{default}/" in i and "/flydsl-" in i for i in idents.values())
    tuned = configs.SPACES["gfx950"]["grouped_mm"][-1]
    assert backend.gate_identity("grouped_mm", info, torch.bfloat16, calls["2Dx3D"],
                                 tuned.to_dict()) != idents["2Dx3D"]  # the config counts too
    nt = backend.gate_identity("gemm", info, torch.bfloat16,
                               (_bf16(16, 64), _bf16(32, 64).t(), None, None), None)
    nn = backend.gate_identity("gemm", info, torch.bfloat16,
                               (_bf16(16, 64), _bf16(64, 32), None, None), None)
    assert nt != nn  # the operand majors select different code


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


@pytest.mark.l1
def test_flydsl_is_tunable_up_to_ranking_without_the_chip():
    """The tuner's view of the backend: the arch's space with its real code objects, pruned
    and ranked by the model. Timing needs the chip (the probe keeps the backend out of
    `xvendor tune` here), so the loop stops at ranking on this machine."""
    from xvendor.tuning import model
    from xvendor.tuning.tune_cli import tunable_backends
    tun = registry.tunable("flydsl")
    info = devices.hypothetical("gfx950")
    cands = tun.candidates("grouped_mm", info, None)
    assert {c.name for c in cands} == {c.name for c in configs.SPACES["gfx950"]["grouped_mm"]}
    assert all(c.record["ok"] and c.record["spills"] == 0 for c in cands)
    kept, dropped = model.prune([dict(c.record, config=c.config, config_name=c.name)
                                 for c in cands], 32768, 4096, 7168, 256)
    ranked = model.rank(kept, 32768, 4096, 7168, 256, "bfloat16", "gfx950")
    assert ranked and ranked[0][0] > 0
    assert tun.default_name("gfx950", "grouped_mm") == configs.default("gfx950", "grouped_mm").name
    assert "flydsl" not in tunable_backends("grouped_mm", info, torch.bfloat16)  # no device


def test_rms_norm_backward_is_served_on_request_only():
    """The dispatched backward op (``xvendor.rms_norm``'s autograd calls it) has a flydsl
    kernel; like the forward it is no default anywhere (no device timing yet)."""
    import xvendor
    import xvendor.ops  # noqa: F401 (defines the ops)
    rec = registry.backends()["flydsl"]
    assert "rms_norm_backward" not in rec.defaults
    info = devices.hypothetical("gfx950")
    assert registry.select("rms_norm_backward", info, torch.bfloat16, dry_run=True).backend \
        == "reference"  # torch has no rms_norm backward op of its own
    dec = registry.select("rms_norm_backward", info, torch.bfloat16, requested="flydsl",
                          dry_run=True)
    assert dec.backend == "flydsl"
    x = _bf16(4, 4096)
    dec = xvendor.explain("rms_norm_backward", x, x, _bf16(4096), arch="gfx950",
                          backend="flydsl")
    assert dec.backend == "flydsl" and "-> flydsl" in str(dec)


def test_rms_norm_backward_gate_identity_is_one_per_compiled_specialization():
    info = devices.hypothetical("gfx950")
    g, x = _bf16(4, 4096), _bf16(4, 4096)
    calls = {
        "bf16 w": (g, x, _bf16(4096), 1e-6),
        "fp32 w": (g, x, torch.randn(4096), 1e-6),
        "no w": (g, x, None, 1e-6),
        "ragged": (_bf16(4, 4097), _bf16(4, 4097), _bf16(4097), 1e-6),
    }
    idents = {k: backend.gate_identity("rms_norm_backward", info, torch.bfloat16, a, None)
              for k, a in calls.items()}
    assert len(set(idents.values())) == len(idents), idents
    default = configs.NORM_BWD_DEFAULTS["gfx950"].name
    assert all(i.startswith(f"rms_norm_bwd/{default}/") for i in idents.values())
    tuned = configs.NORM_BWD_SPACES["gfx950"][-1].to_dict()
    assert backend.gate_identity("rms_norm_backward", info, torch.bfloat16, calls["bf16 w"],
                                 tuned) != idents["bf16 w"]  # the config counts too
    # the forward's identity never vouches for the backward
    assert backend.gate_identity("rms_norm", info, torch.bfloat16, (x, _bf16(4096), 1e-6),
                                 None) != idents["bf16 w"]


def test_scaled_mm_is_served_on_request_with_one_gate_verdict_per_format_and_recipe():
    """On a (hypothetical) gfx950 flydsl serves scaled_mm only when asked, bf16 out only; the
    gate keys MX e4m3, MX e2m1 and RowWise e4m3 apart."""
    from torch.nn.functional import ScalingType

    import xvendor
    from xvendor import devices
    e4, fp4, mx, rw = (torch.float8_e4m3fn, torch.float4_e2m1fn_x2, ScalingType.BlockWise1x32,
                       ScalingType.RowWise)
    a, sa = xvendor.quantize(torch.randn(64, 128), e4, "mx")
    w, sw = xvendor.quantize(torch.randn(32, 128), e4, "mx")
    args = (a, w.t(), sa, mx, sw, mx)
    # no default of ours: torch's own MX GEMM (hipBLASLt) is the floor there
    assert xvendor.explain("scaled_mm", *args, arch="gfx950").backend == "torch"
    assert xvendor.explain("scaled_mm", *args, arch="gfx950", backend="flydsl").backend == "flydsl"
    with pytest.raises(xvendor.BackendUnavailable, match="float32 for scaled_mm"):
        xvendor.explain("scaled_mm", *args, arch="gfx950", backend="flydsl",
                        output_dtype=torch.float32)
    a4, sa4 = xvendor.quantize(torch.randn(64, 128), fp4, "mx")
    w4, sw4 = xvendor.quantize(torch.randn(32, 128), fp4, "mx")
    ar, sar = xvendor.quantize(torch.randn(64, 128), e4, "rowwise")
    wr, swr = xvendor.quantize(torch.randn(32, 128), e4, "rowwise")
    info = devices.hypothetical("gfx950")
    ids = {backend.gate_identity("scaled_mm", info, torch.bfloat16, call, None)
           for call in (args, (a4, w4.t(), sa4, mx, sw4, mx), (ar, wr.t(), sar, rw, swr.t(), rw))}
    assert len(ids) == 3
    # the identity names what the plan compiles, the C store width (n_align) included:
    # N = 32 and N = 36 are two code objects (8- and 4-element stores)
    from xvendor.rocm import scaled_configs, scaled_launch
    w36, sw36 = xvendor.quantize(torch.randn(36, 128), e4, "mx")
    aligns = []
    for call in (args, (a, w36.t(), sa, mx, sw36, mx), (ar, wr.t(), sar, rw, swr.t(), rw)):
        plan = scaled_launch.plan_scaled_mm(*call, cfg=scaled_configs.default("gfx950"))
        flags = ",".join(f"{k}={v}" for k, v in sorted(plan.spec.items()))
        assert f"/{flags}/" in backend.gate_identity("scaled_mm", info, torch.bfloat16, call, None)
        aligns.append(plan.spec["n_align"])
    assert aligns == [8, 4, 8]


@pytest.mark.l0
def test_the_flydsl_arch_pair_is_one_datum():
    """The record, the backend, the scaled configs and the tuning tables read the pair from
    rocm.configs, and its wave widths agree with the arch table."""
    from xvendor import archs
    from xvendor.rocm import backend, configs, record, scaled_configs
    from xvendor.tuning import compile_cli, shipped
    assert record.BACKEND.archs == frozenset(configs.TARGETS)
    assert backend.ARCHS is configs.TARGETS is scaled_configs.TARGETS is shipped.ARCHS
    assert compile_cli.BACKEND_TARGETS["flydsl"] is configs.TARGETS
    for arch in configs.TARGETS:
        assert configs.WAVE[arch] == archs.arch_spec(arch).wave_size
