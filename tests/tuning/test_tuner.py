"""The tuning loop end to end on the CPU with a real tunable kernel: prune, rank, gate,
time, store, serve."""

import pytest
import torch

from xvendor import devices
from xvendor.testing import cpu_tunable
from xvendor.tuning import serve, tuner
from xvendor.tuning.problem import key_for
from xvendor.tuning.store import TuningStore

pytestmark = pytest.mark.l0

CPUBLOCKED = cpu_tunable.backend_record()


def test_tune_gates_times_stores_and_serves(tmp_path, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    info = devices.detect("cpu")
    gen = torch.Generator().manual_seed(0)
    argsets = [(torch.randn(128, 128, generator=gen), torch.randn(128, 96, generator=gen), None, None)
               for _ in range(3)]
    key = key_for("gemm", "*", info.arch, info.cu_count, info.product, argsets[0])
    store = TuningStore(info.arch, info.cu_count)
    seen = []
    res = tuner.tune("gemm", "cpublocked", cpu_tunable.TUNABLE, info, key, argsets, store,
                     default_name="64x64", progress=seen.append)
    rows = {r.name: r for r in res.rows}
    assert rows["128x128_wrong"].status.startswith("gate failed")  # never timed
    assert rows["128x128_wrong"].measured_us is None
    assert rows["256x256"].status.startswith("pruned: tile larger than the problem")
    timed = [r for r in res.rows if r.measured_us is not None]
    assert len(timed) >= 4 and res.winner.measured_us == min(r.measured_us for r in timed)
    assert res.default_us is not None and res.aten_us > 0
    assert len(seen) == len([r for r in res.rows if r.predicted_us is not None])
    # Served: the backend's own entry is the measured winner, with provenance.
    fresh = TuningStore(info.arch, info.cu_count)
    own = fresh.get(key.__class__(**{**key.__dict__, "backend": "cpublocked"}))
    assert own.config_name == res.winner.name and own.measured
    assert own.provenance["versions"]["torch"] == torch.__version__
    star = fresh.get(key)
    assert (star is not None) == (res.winner.measured_us < res.aten_us)


def test_top_k_and_budget(tmp_path):
    info = devices.detect("cpu")
    argsets = [(torch.randn(128, 64), torch.randn(64, 128), None, None)]
    key = key_for("gemm", "*", info.arch, info.cu_count, info.product, argsets[0])
    store = TuningStore(info.arch, info.cu_count, tmp_path)
    res = tuner.tune("gemm", "cpublocked", cpu_tunable.TUNABLE, info, key, argsets, store, top_k=2)
    assert sum(r.status == "timed" or r.status.startswith("gate") for r in res.rows) == 2
    res = tuner.tune("gemm", "cpublocked", cpu_tunable.TUNABLE, info, key, argsets, store, budget_s=0.0)
    assert res.winner is None and any("time budget" in r.status for r in res.rows)


def test_tune_cli_end_to_end(tmp_path, monkeypatch, capsys):
    import xvendor
    from xvendor import cli, registry
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    registry.reset()
    xvendor.register(CPUBLOCKED)
    rc = cli.main(["tune", "--shape", "gemm:128x96x128", "--dtype", "float32",
                   "--backend", "cpublocked", "--top-k", "8"])
    out = capsys.readouterr().out
    assert rc == 0 and "<- winner" in out and "gate failed" in out
    info = devices.detect("cpu")
    entries = TuningStore(info.arch, info.cu_count).entries
    assert any("|cpublocked|" in k for k in entries)
    assert cli.main(["tune"]) == 2  # nothing to tune is an error, not a silent success


def test_capture_then_tune_from_the_capture_file(tmp_path, monkeypatch, capsys):
    import xvendor
    from xvendor import cli, registry
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    monkeypatch.setenv("XVENDOR_TUNE", "capture")
    monkeypatch.setenv("XVENDOR_TUNE_CAPTURE", str(tmp_path / "captured.json"))
    serve.clear_capture()
    registry.reset()
    xvendor.gemm(torch.randn(100, 64), torch.randn(64, 40))  # the "training run"
    path = serve.write_capture()
    monkeypatch.delenv("XVENDOR_TUNE")
    xvendor.register(CPUBLOCKED)
    assert cli.main(["tune", "--from", str(path), "--backend", "cpublocked"]) == 0
    assert "gemm NN M~128 N=40 K=64" in capsys.readouterr().out
    serve.clear_capture()


def test_the_gate_is_the_ops_own_spec_for_scaled_ops_too():
    """Kernel arguments are split into the op's (args, kwargs) (the scaled ops' swizzles and
    output dtype are keyword-only) and judged by the op's error hook: the reference passes,
    5% off fails (bf16 tolerance 1.6e-2), the wrong output dtype fails."""
    import xvendor
    from torch.nn.functional import ScalingType

    from xvendor import reference
    mx = ScalingType.BlockWise1x32.value
    g = torch.Generator().manual_seed(3)
    offs = torch.tensor([30, 30, 100], dtype=torch.int32)
    a, sa = xvendor.quantize(torch.randn(100, 64, generator=g), torch.float8_e4m3fn, "mx")
    w, sw = xvendor.quantize(torch.randn(3, 48, 64, generator=g), torch.float8_e4m3fn, "mx")
    args = (a, w.transpose(1, 2), sa, mx, sw, mx, offs, 0, 0, torch.bfloat16)
    pos, kw = tuner.split_args("scaled_grouped_mm", args)
    assert len(pos) == 7 and kw["output_dtype"] is torch.bfloat16
    ref = tuner.oracle("scaled_grouped_mm", args)
    good = reference.scaled_grouped_mm(*args)
    assert tuner.gate("scaled_grouped_mm", good, ref, args) is None
    assert "gate failed" in tuner.gate("scaled_grouped_mm", good * 1.05, ref, args)
    assert "gate failed" in tuner.gate("scaled_grouped_mm", good.float(), ref, args)


def test_a_rank_hook_that_declines_leaves_the_gemm_family_to_the_model():
    """``rank`` returning None (the FlyDSL tunable's answer for GEMMs) means the analytical
    model prunes and ranks, exactly as for a tunable without the hook."""
    class Declines:
        def __init__(self):
            self.asked = []

        def candidates(self, op, info, key):
            return cpu_tunable.TUNABLE.candidates(op, info, key)

        def rank(self, op, info, key, cands):
            self.asked.append(op)

    info = devices.detect("cpu")
    key = key_for("gemm", "*", info.arch, info.cu_count, info.product,
                  (torch.empty(128, 64), torch.empty(64, 128), None, None))
    t = Declines()
    cands = t.candidates("gemm", info, key)
    got = tuner.rank_candidates("gemm", t, info, key, cands)
    want = tuner.rank_candidates("gemm", cpu_tunable.TUNABLE, info, key, cands)
    assert t.asked == ["gemm"] and got == want and got[2] == tuner.MODEL_NAME
    assert "256x256" in got[1]  # pruned by the model: tile larger than the problem
