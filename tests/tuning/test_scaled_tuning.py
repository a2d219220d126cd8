"""Tuning the scaled (FP8/MX) templates: problem keys, ranking from real compile records,
serving, capture.

l0: keys of scaled calls hold the recipe and both element formats (and the output dtype);
the tuner's input generator rebuilds a call of exactly the key; the analytical model uses
the FP8/FP4 peaks (bf16 where the compiled MMA is a bf16 one, i.e. emulated MX) and fp8/fp4
bytes; a stored winner reaches the kernel as ``config=`` for the calls of its key only;
``XVENDOR_TUNE=capture`` records scaled keys that ``xvendor tune --from`` reads back.
l1: real ``triton.compile`` records of the scaled space (gfx950, sm_90) are pruned with the
exact-instruction rule and ranked, and ``xvendor tune --arch`` stores the prediction; the
served config drives the real Triton launch in the interpreter.
Not here: gating and timing scaled candidates on a device (l2; no GPU on CI runners).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.functional import ScalingType

import xvendor
from xvendor import devices, reference, registry
from xvendor.ops._common import SPECS
from xvendor.tuning import model, serve, tune_cli
from xvendor.tuning.problem import ProblemKey, key_for
from xvendor.tuning.store import TuningStore, Winner

E4, E5, FP4 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float4_e2m1fn_x2
TW, RW, MX = (ScalingType.TensorWise, ScalingType.RowWise, ScalingType.BlockWise1x32)
ROOT = Path(__file__).resolve().parents[2]


def _mm_args(fmt_a, fmt_b, recipe, m=100, n=48, k=64, out=torch.bfloat16, seed=0):
    """A scaled_mm call as the op hands it to kernels: b = the transpose of (N, K) rows."""
    g = torch.Generator().manual_seed(seed)
    name = {TW: "tensorwise", RW: "rowwise", MX: "mx"}[recipe]
    a, sa = xvendor.quantize(torch.randn(m, k, generator=g), fmt_a, name)
    w, sw = xvendor.quantize(torch.randn(n, k, generator=g), fmt_b, name)
    sb = sw.t() if recipe == RW else sw
    return (a, w.t(), sa, recipe.value, sb, recipe.value, 0, 0, None, out)


def _key(op, args, backend="*"):
    info = devices.detect("cpu")
    return key_for(op, backend, info.arch, info.cu_count, info.product, args)


@pytest.mark.l0
def test_keys_distinguish_recipes_formats_and_output_dtype():
    calls = {  # same M, N, K: only what is multiplied differs
        "mx:e4m3xe4m3": _mm_args(E4, E4, MX),
        "mx:e2m1xe2m1": _mm_args(FP4, FP4, MX),
        "mx:e5m2xe4m3": _mm_args(E5, E4, MX),
        "rowwise:e4m3xe5m2": _mm_args(E4, E5, RW),
        "tensorwise:e4m3xe4m3": _mm_args(E4, E4, TW),
    }
    keys = {want: _key("scaled_mm", args) for want, args in calls.items()}
    for want, k in keys.items():
        assert k.dtype == want and k.out_dtype == "bfloat16"
        assert (k.layout, k.m, k.n, k.k, k.groups) == ("NT", 128, 48, 64, 0)  # fp4: K elements
        recipe, formats = want.split(":")
        assert ProblemKey.parse(str(k)) == k and k.scaled == (recipe, *formats.split("x"))
    assert len({str(k) for k in keys.values()}) == len(keys)
    f32 = _key("scaled_mm", _mm_args(E4, E4, MX, out=torch.float32))
    assert f32.out_dtype == "float32" and f32 != keys["mx:e4m3xe4m3"]
    bf16 = _key("gemm", (torch.randn(100, 64), torch.randn(48, 64).t(), None, None))
    assert bf16.scaled is None and bf16.dtype == "float32"  # other ops' keys are unchanged


@pytest.mark.l0
@pytest.mark.parametrize("text", [
    "scaled_mm|*|cpu|2|p|mx:e4m3xe4m3|bfloat16|NT|128|48|64|0|1",
    "scaled_mm|*|cpu|2|p|mx:e2m1xe2m1|float32|NT|64|40|96|0|1",        # fp4, K elements
    "scaled_mm|*|cpu|2|p|rowwise:e4m3xe5m2|bfloat16|NN|32|24|64|0|1",  # row-major b
    "scaled_mm|*|cpu|2|p|tensorwise:e5m2xe4m3|float16|TT|16|8|32|0|1",  # transposed a
    "scaled_grouped_mm|*|cpu|2|p|rowwise:e4m3xe4m3|bfloat16|2Dx3D:NT|64|24|64|4|1",
    "scaled_grouped_mm|*|cpu|2|p|mx:e2m1xe2m1|bfloat16|2Dx3D:NT|64|16|64|2|1",
    "scaled_grouped_mm|*|cpu|2|p|mx:e4m3xe4m3|bfloat16|2Dx2D:NT|16|24|256|4|1",  # ragged K
])
def test_tuning_inputs_are_calls_of_exactly_the_key(text):
    key = ProblemKey.parse(text)
    args = tune_cli.make_args(key, "cpu", torch.Generator().manual_seed(1))
    assert key_for(key.op, "*", "cpu", 2, "p", args) == key
    SPECS[key.op].check(*args)  # a valid call of the op (its own argument rules)
    out = getattr(reference, key.op)(*args)
    assert out.dtype == getattr(torch, key.out_dtype) and torch.isfinite(out).all()
    if key.op == "scaled_grouped_mm" and key.layout.startswith("2Dx2D"):
        assert (args[6] % 32 == 0).all() and int(args[6][-1]) == key.k  # block-aligned groups


@pytest.mark.l0
def test_shape_option_names_recipe_and_formats_per_problem():
    info = devices.hypothetical("gfx950")
    k = tune_cli.parse_shape("scaled_grouped_mm:300x4096x7168:200:rowwise:e4m3xe5m2", info,
                             "float32")
    assert (k.dtype, k.out_dtype, k.layout, k.m, k.groups) == \
        ("rowwise:e4m3xe5m2", "float32", "2Dx3D:NT", 512, 256)
    k = tune_cli.parse_shape("scaled_mm:64x8192x8192", info, "bfloat16", "mx:e2m1xe2m1")
    assert (k.op, k.dtype, k.m, k.n, k.k) == ("scaled_mm", "mx:e2m1xe2m1", 64, 8192, 8192)
    with pytest.raises(SystemExit, match="RECIPE:AxB"):
        tune_cli.parse_shape("scaled_mm:64x64x64", info, "bfloat16", "mx:e4m3xfp8")


@pytest.mark.l0
def test_model_uses_fp8_fp4_peaks_and_bytes():
    spec = devices.ARCHS["gfx950"]
    assert model.peak_tflops(spec, "mx:e4m3xe4m3") == spec.peak_tflops["float8_e4m3fn"]
    assert model.peak_tflops(spec, "mx:e2m1xe2m1") == spec.peak_tflops["float4_e2m1fn_x2"]
    assert model.peak_tflops(spec, "rowwise:e4m3xe5m2") == spec.peak_tflops["float8_e4m3fn"]
    assert model.peak_tflops(spec, "bfloat16") == spec.peak_tflops["bfloat16"]
    h = devices.ARCHS["sm_90"]  # MX emulated: the record's instruction is a bf16 wgmma
    emulated = "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"
    assert model.peak_tflops(h, "mx:e4m3xe4m3", emulated) == h.peak_tflops["bfloat16"]
    assert model.tile_bytes("mx:e2m1xe2m1", 128, 128, 4096) * 2 < \
        model.tile_bytes("mx:e4m3xe4m3", 128, 128, 4096) * 1.1
    assert model.tile_bytes("rowwise:e4m3xe4m3", 128, 128, 4096) == 2 * 128 * 4096
    cfg = {"block_m": 128, "block_n": 128, "block_k": 128}
    fp8 = model.predict_us(8192, 8192, 8192, 0, "mx:e4m3xe4m3", cfg, 2, "gfx950")
    fp4 = model.predict_us(8192, 8192, 8192, 0, "mx:e2m1xe2m1", cfg, 2, "gfx950")
    b16 = model.predict_us(8192, 8192, 8192, 0, "bfloat16", cfg, 2, "gfx950")
    assert fp4 < fp8 < b16


@pytest.mark.l0
def test_wrong_instruction_is_pruned_and_variants_follow_the_key():
    from xvendor.triton import scaled_configs, tunable
    cfg = scaled_configs.SPACES["gfx950"]["scaled_mm"][0]
    rec = {"ok": True, "reason": "", "mma_instr": "v_mfma_f32_16x16x32_fp8_fp8"}  # MI300-era
    judged = tunable._judge(rec, "gfx950", "scaled_mm:fp8_rowwise", cfg)
    assert not judged["ok"] and "v_mfma_f32_16x16x128_f8f6f4" in judged["reason"]
    good = dict(rec, mma_instr="v_mfma_f32_16x16x128_f8f6f4")
    assert tunable._judge(good, "gfx950", "scaled_mm:fp8_rowwise", cfg)["ok"]

    def key(op, dtype, layout="NT"):
        return ProblemKey(op, "*", "gfx950", 256, "p", dtype, "bfloat16", layout, 128, 64, 64)
    assert tunable.variant_for(key("scaled_mm", "mx:e2m1xe2m1")) == ("scaled_mm:mxfp4", True)
    assert tunable.variant_for(key("scaled_mm", "mx:e5m2xe4m3")) == ("scaled_mm:mxfp8", False)
    # TensorWise is the RowWise kernel with scale strides 0: the same compiled template
    assert tunable.variant_for(key("scaled_mm", "tensorwise:e4m3xe4m3")) == \
        ("scaled_mm:fp8_rowwise", True)
    assert tunable.variant_for(key("scaled_mm", "rowwise:e5m2xe4m3")) == \
        ("scaled_mm:fp8_rowwise", False)
    assert tunable.variant_for(key("scaled_grouped_mm", "mx:e4m3xe4m3", "2Dx2D:TN")) == \
        ("scaled_grouped_mm:2Dx2D_mxfp8", True)
    with pytest.raises(ValueError, match="no scaled Triton template variant"):
        tunable.variant_for(key("scaled_grouped_mm", "rowwise:e4m3xe4m3", "2Dx2D:TN"))


@pytest.fixture
def tuning_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    serve.clear_capture()
    registry.reset()
    yield tmp_path
    serve.clear_capture()
    registry.reset(configuration=True)


@pytest.mark.l0
def test_a_stored_winner_reaches_the_kernel_for_its_calls_only(tuning_dir, recording_backend):
    mod = recording_backend("tunedscaled", ("scaled_mm", "scaled_grouped_mm"))
    info = devices.detect("cpu")
    mx = _mm_args(E4, E4, MX)
    config = {"block_m": 32, "block_n": 64, "block_k": 128, "num_warps": 4}
    store = TuningStore(info.arch, info.cu_count)
    measured = {"kind": "measured", "device": "cpu"}
    store.put(_key("scaled_mm", mx), Winner("tunedscaled", config, "32x64x128", 1.0,
                                            provenance=measured))
    registry.reset()  # a table now exists: the hook installs its lookup

    def call(args, **kw):
        a, b, sa, ra, sb, rb, *_ = args
        return xvendor.scaled_mm(a, b, sa, ra, sb, rb, output_dtype=args[-1], **kw)
    out = call(_mm_args(E4, E4, MX, m=120, seed=5))  # same M bucket (128): served
    assert mod.CONFIGS == [("scaled_mm", config)]
    torch.testing.assert_close(out, reference.scaled_mm(*_mm_args(E4, E4, MX, m=120, seed=5)))
    for other in (_mm_args(FP4, FP4, MX), _mm_args(E4, E4, RW), _mm_args(E5, E4, MX),
                  _mm_args(E4, E4, MX, out=torch.float32), _mm_args(E4, E4, MX, n=40)):
        call(other)  # another recipe, format, output dtype or N: not this winner -> aten
    assert len(mod.CONFIGS) == 1
    # A backend's own entry: its config on explicit request (here for MXFP4 only).
    fp4 = _mm_args(FP4, FP4, MX)
    store.put(_key("scaled_mm", fp4, "tunedscaled"),
              Winner("tunedscaled", {"block_m": 16}, "16", 1.0, provenance=measured))
    registry.reset()
    call(fp4, backend="tunedscaled")
    call(_mm_args(E4, E4, RW), backend="tunedscaled")  # no entry: the backend's default
    assert mod.CONFIGS[1:] == [("scaled_mm", {"block_m": 16}), ("scaled_mm", None)]


@pytest.mark.l0
def test_capture_records_scaled_keys_and_tune_from_reads_them(tuning_dir, monkeypatch, capsys):
    from xvendor import cli
    monkeypatch.setenv("XVENDOR_TUNE", "capture")
    monkeypatch.setenv("XVENDOR_TUNE_CAPTURE", str(tuning_dir / "seen.json"))
    registry.reset()
    a, b, sa, ra, sb, rb, *_ = _mm_args(E4, E4, MX)
    xvendor.scaled_mm(a, b, sa, ScalingType.BlockWise1x32, sb, ScalingType.BlockWise1x32)
    a, b, sa, ra, sb, rb, *_ = _mm_args(E4, E5, RW)
    xvendor.scaled_mm(a, b, sa, ScalingType.RowWise, sb, ScalingType.RowWise)
    g = torch.Generator().manual_seed(2)
    x, sx = xvendor.quantize(torch.randn(40, 64, generator=g), E4, "mx")
    w, sw = xvendor.quantize(torch.randn(3, 24, 64, generator=g), E4, "mx")
    offs = torch.tensor([10, 10, 40], dtype=torch.int32)
    xvendor.scaled_grouped_mm(x, w.transpose(1, 2), sx, MX, sw, MX, offs)
    keys = {(k.op, k.dtype, k.layout) for k in serve.captured_keys(serve.write_capture())}
    assert keys == {("scaled_mm", "mx:e4m3xe4m3", "NT"), ("scaled_mm", "rowwise:e4m3xe5m2", "NT"),
                    ("scaled_grouped_mm", "mx:e4m3xe4m3", "2Dx3D:NT")}
    monkeypatch.delenv("XVENDOR_TUNE")
    registry.reset()
    # Inputs are generated for every captured scaled key; no backend can tune scaled ops on a
    # CPU without the Triton interpreter, which is reported per problem (not a crash).
    assert cli.main(["tune", "--from", str(tuning_dir / "seen.json")]) == 1
    out = capsys.readouterr().out
    assert out.count("skipped: ValueError: no tunable backend can run on cpu") == 3


# --- l1: real compile records --------------------------------------------------------------

@pytest.mark.l1
def test_ranking_from_real_compile_records(compile_cache, monkeypatch, tmp_path):
    pytest.importorskip("triton")
    from xvendor.triton import scaled_configs, tunable
    monkeypatch.setenv("XVENDOR_CACHE_DIR", str(compile_cache))
    key = ProblemKey("scaled_mm", "*", "gfx950", 256, "p", "mx:e4m3xe4m3", "bfloat16", "NT",
                     8192, 8192, 4096)
    recs = tunable.scaled_records("gfx950", key)
    assert [r["config_name"] for r in recs] == \
        [c.name for c in scaled_configs.SPACES["gfx950"]["scaled_mm"]]
    for r in recs:  # real code objects: exact instruction, no spills, LDS in the limit
        assert r["ok"], r
        assert r["mma_instr"] in ("v_mfma_scale_f32_16x16x128_f8f6f4",
                                  "v_mfma_scale_f32_32x32x64_f8f6f4")
        assert r["spills"] == 0 and 0 < r["lds_bytes"] <= 160 * 1024 and r["occupancy"] >= 1
    res = tune_cli.predict(key, tunable.TUNABLE, devices.hypothetical("gfx950"))
    ranked = [r for r in res.rows if r.predicted_us is not None]
    assert len(ranked) == len(recs) and res.winner is ranked[0]
    assert [r.predicted_us for r in ranked] == sorted(r.predicted_us for r in ranked)
    assert all(r.measured_us is None for r in res.rows)  # nothing timed without a device
    # sm_90 has no block-scaled MMA: its records show the bf16 wgmma, ranked at bf16 peak
    h = dict(key.__dict__, arch="sm_90", cus=132)
    hrecs = tunable.scaled_records("sm_90", ProblemKey(**h))
    assert all(r["ok"] and ".bf16.bf16" in r["mma_instr"] for r in hrecs)
    spec = devices.ARCHS["sm_90"]
    assert model.peak_tflops(spec, key.dtype, hrecs[0]["mma_instr"]) == spec.peak("bfloat16")
    cfg, occ = hrecs[0]["config"], hrecs[0]["occupancy"]
    assert model.predict_us(8192, 8192, 4096, 0, key.dtype, cfg, occ, "sm_90",
                            hrecs[0]["mma_instr"]) >= \
        model.predict_us(8192, 8192, 4096, 0, key.dtype, cfg, occ, "sm_90")


@pytest.mark.l1
def test_tune_arch_stores_a_prediction_served_on_that_chip(compile_cache, monkeypatch, tmp_path,
                                                           capsys):
    pytest.importorskip("triton")
    from xvendor import cli
    monkeypatch.setenv("XVENDOR_CACHE_DIR", str(compile_cache))
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    rc = cli.main(["tune", "--shape", "scaled_mm:8192x8192x4096:mx:e4m3xe4m3",
                   "--arch", "gfx950", "--product", "AMD Instinct MI355X", "--backend", "triton"])
    out = capsys.readouterr().out
    assert rc == 0 and "<- winner" in out and "nothing was timed" in out
    entries = TuningStore("gfx950", 256).entries
    (k, w), = entries.items()
    assert "|triton|gfx950|256|" in k and "|mx:e4m3xe4m3|bfloat16|NT|8192|8192|4096|" in k
    assert w.provenance["kind"] == "predicted" and w.measured_us is None
    # Served on that chip: the dispatch layer's lookup, for triton's own problem only.
    info = devices.DeviceInfo(torch.device("cuda", 0), "amd", "gfx950", "AMD Instinct MI355X",
                              256, devices.ARCHS["gfx950"])
    sc = ("NT", 8192, 8192, 4096, 0, "bfloat16", "mx:e4m3xe4m3")
    serve.clear_stores()
    assert serve.lookup("scaled_mm", info, torch.bfloat16, sc, "triton") == ("triton", w.config)
    assert serve.lookup("scaled_mm", info, torch.bfloat16, sc) is None  # never a default
    assert serve.lookup("scaled_mm", info, torch.bfloat16, sc[:6] + ("mx:e2m1xe2m1",),
                        "triton") is None


_SERVED = """
import json, torch, xvendor
from torch.nn.functional import ScalingType
from xvendor import devices, numerics, registry
from xvendor.triton import backend, scaled_launch
from xvendor.tuning.problem import key_for
from xvendor.tuning.store import TuningStore, Winner
assert scaled_launch.interpreting()
g = torch.Generator().manual_seed(3)
a, sa = xvendor.quantize(torch.randn(40, 96, generator=g), torch.float8_e4m3fn, "mx")
w, sw = xvendor.quantize(torch.randn(24, 96, generator=g), torch.float8_e4m3fn, "mx")
mx = ScalingType.BlockWise1x32.value
args = (a, w.t(), sa, mx, sw, mx, 0, 0, None, torch.float32)
info = devices.detect("cpu")
config = {"block_m": 16, "block_n": 32, "block_k": 64, "group_m": 2, "num_warps": 4,
          "num_stages": 1}
TuningStore(info.arch, info.cu_count).put(
    key_for("scaled_mm", "triton", info.arch, info.cu_count, info.product, args),
    Winner("triton", config, "16x32x64", 1.0, provenance={"kind": "measured"}))
registry.reset()
seen, real = [], scaled_launch.scaled_mm_launch
def spy(*a, **k):
    seen.append(a[7]); return real(*a, **k)
scaled_launch.scaled_mm_launch = spy
backend.POISON_OUTPUTS = True
out = xvendor.scaled_mm(a, w.t(), sa, mx, sw, mx, output_dtype=torch.float32, backend="triton")
err = numerics.rel_error(out, numerics.scaled_mm(*args[:6]))  # fp64 oracle
print(json.dumps({"configs": [c.to_dict() for c in seen], "err": err,
                  "finite": bool(torch.isfinite(out).all())}))
"""


@pytest.mark.l1
def test_served_config_drives_the_triton_launch_in_the_interpreter(tmp_path):
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1", XVENDOR_TUNING_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", _SERVED], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    (cfg,) = res["configs"]  # one launch, with the stored config (not the interpreter default)
    assert (cfg["block_m"], cfg["block_n"], cfg["block_k"]) == (16, 32, 64)
    # NaN-poisoned output fully written; fp32 accumulation error only
    assert res["finite"] and res["err"] <= 2e-5


@pytest.mark.l0
def test_the_tuners_gate_checks_scaled_outputs_against_their_oracle():
    """The gate compares a scaled candidate with the fp64 oracle of the same operands: the
    reference passes; the same output with one block's scale ignored fails."""
    from xvendor.tuning import tuner
    args = _mm_args(torch.float8_e4m3fn, torch.float8_e4m3fn, MX)
    good = reference.scaled_mm(*args)
    assert tuner.gate("scaled_mm", good, tuner.oracle("scaled_mm", args), args) is None
    bad_scale = args[2].clone()
    bad_scale.view(torch.uint8)[0, 0] += 1  # one E8M0 block scaled 2x
    bad = reference.scaled_mm(args[0], args[1], bad_scale, *args[3:])
    assert "gate failed" in tuner.gate("scaled_mm", bad, tuner.oracle("scaled_mm", args), args)
    g = torch.Generator().manual_seed(3)
    offs = torch.tensor([30, 30, 100], dtype=torch.int32)
    a, sa = xvendor.quantize(torch.randn(100, 64, generator=g), torch.float8_e4m3fn, "mx")
    w, sw = xvendor.quantize(torch.randn(3, 48, 64, generator=g), torch.float8_e4m3fn, "mx")
    gargs = (a, w.transpose(1, 2), sa, MX.value, sw, MX.value, offs, 0, 0, torch.bfloat16)
    assert tuner.gate("scaled_grouped_mm", reference.scaled_grouped_mm(*gargs),
                      tuner.oracle("scaled_grouped_mm", gargs), gargs) is None
