"""FlyDSL RMSNorm (forward, backward) and topk through the tuner's view of the backend: their
templates in the compile sweep, candidates from the sweep's real code objects, the
memory-bound model's ranking (NOTE [memory-bound model] in ``xvendor.rocm.tunable``), the
``predicted`` entries it makes without the chip, and their export in FlyDSL's
offline-config format, loaded by FlyDSL's own loader. Timing needs gfx950/gfx1250
hardware: nothing here times a FlyDSL kernel."""

import json

import pytest

from xvendor import archs, devices
from xvendor.rocm import configs, crosscompile, tunable

ARCH = "gfx950"
BW = archs.arch_spec(ARCH).hbm_tbps * 1e12


def _rec(template, cfg, occupancy=8, ok=True, default=False):
    return {"template": template, "config": cfg.to_dict(), "config_name": cfg.name, "ok": ok,
            "reason": "" if ok else "spills (3 registers)", "occupancy": occupancy,
            "default": default}


# -- l0: the templates in the sweep, and the model on its own -------------------------

@pytest.mark.l0
def test_sweep_covers_the_norm_backward_and_topk_templates():
    pytest.importorskip("flydsl")
    from xvendor.tuning import sweep
    tc = sweep.toolchain("flydsl")
    jobs = {(t, a) for t, a, _ in sweep.plan(tc, configs.TARGETS, "default")}
    for arch in configs.TARGETS:
        for t in ("rms_norm_bwd", "rms_norm_bwd:fp32", "rms_norm_bwd:nw", "rms_norm:residual",
                  "topk:router", "topk:router:fp32", "topk:radix", "topk:radix:smallest"):
            assert (t, arch) in jobs
            assert t in crosscompile.PROBLEMS
    full = [(t, c) for t, a, c in sweep.plan(tc, [ARCH], "all", templates=["topk:radix"])]
    assert {c.name for _, c in full} == {c.name for c in configs.TOPK_SPACES[ARCH]
                                         if c.form == "radix"}


@pytest.mark.l0
def test_source_hash_follows_the_kernel_modules():
    h = crosscompile.source_hash
    assert h("rms_norm") == h("rms_norm_bwd") == h("rms_norm:residual")  # rmsnorm.py
    assert h("topk:router") == h("topk:radix:smallest") != h("rms_norm")  # + topk.py
    assert h("gemm") != h("rms_norm") and h("gemm") != h("topk:router")


@pytest.mark.l0
def test_every_op_maps_to_templates_with_spaces_and_defaults():
    for arch in configs.TARGETS:
        for op, templates in configs.OP_TEMPLATES.items():
            for t in templates:
                space = configs.candidates(arch, t)
                assert space[0] == configs.default(arch, t) and len(set(space)) == len(space)
                assert all(configs.config_from(t, c.to_dict()) == c for c in space)
    assert configs.base_template("topk:radix:smallest") == "topk:radix"
    assert configs.base_template("rms_norm_bwd:nw") == "rms_norm_bwd"
    assert configs.base_template("gemm:NN") == "gemm"


@pytest.mark.l0
def test_model_is_bytes_over_bandwidth_on_a_full_machine():
    cfg = configs.NormConfig(8, 1, 4)  # 256 lanes x 8 = 2048-element chunks: 8192 is 4 of them
    rows, hidden = 16384, 8192
    t = tunable.predict_us("rms_norm", ARCH, rows, hidden, 0, "bfloat16", cfg.to_dict(), 8)
    assert t == pytest.approx(2 * rows * hidden * 2 / BW * 1e6)  # read x, write y
    # a row one element past the chunk costs a whole extra chunk (idle tail lanes)
    t1 = tunable.predict_us("rms_norm", ARCH, rows, 2049, 0, "bfloat16", cfg.to_dict(), 8)
    t2 = tunable.predict_us("rms_norm", ARCH, rows, 4096, 0, "bfloat16", cfg.to_dict(), 8)
    assert t1 == pytest.approx(t2)
    # narrower accesses rank lower; the backward moves grad, x, dx and its partial rows
    narrow = tunable.predict_us("rms_norm", ARCH, rows, hidden, 0, "bfloat16",
                                configs.NormConfig(4, 1, 4).to_dict(), 8)
    assert narrow > t
    bwd = tunable.predict_us("rms_norm_backward", ARCH, rows, hidden, 0, "bfloat16",
                             configs.NormConfig(8, 8, 4).to_dict(), 8)
    assert bwd >= 3 * rows * hidden * 2 / BW * 1e6


@pytest.mark.l0
def test_small_grids_leave_bandwidth_unused():
    """64 rows of 8192 on 256 CUs: fewer workgroups than slots, so wider workgroups win."""
    d = tunable.predict_us
    few = d("rms_norm", ARCH, 64, 8192, 0, "bfloat16", configs.NormConfig(8, 1, 16).to_dict(), 2)
    many = d("rms_norm", ARCH, 64, 8192, 0, "bfloat16", configs.NormConfig(8, 1, 4).to_dict(), 8)
    assert few < many
    assert few > 2 * 64 * 8192 * 2 / BW * 1e6  # never faster than the bytes allow


@pytest.mark.l0
def test_prune_drops_failed_compiles_and_what_the_kernel_does_not_take():
    router, radix = configs.TOPK_DEFAULTS[ARCH]["router"], configs.TOPK_DEFAULTS[ARCH]["radix"]
    spilled = configs.TopkConfig("radix", 4, 4, 1024)
    recs = [_rec("topk:router", router), _rec("topk:radix", radix),
            _rec("topk:radix", spilled, ok=False)]
    kept, dropped = tunable.prune("topk", ARCH, recs, 64, 151936, 50, "bfloat16")
    assert [r["config_name"] for r in kept] == [radix.name]
    assert "router form on gfx950 takes rows of up to 256" in dropped[router.name]
    assert "cross-compile checks: spills" in dropped[spilled.name]
    kept, dropped = tunable.prune("topk", ARCH, recs[:2], 16384, 256, 8, "bfloat16")
    assert len(kept) == 2 and not dropped
    ranked = tunable.rank("topk", ARCH, kept, 16384, 256, 8, "bfloat16")
    assert ranked[0][1]["config_name"] == router.name  # a router row is one wave's load
    _, dropped = tunable.prune("topk", ARCH, recs[1:2], 4, 5000, 1500, "bfloat16")
    assert "k <= 1024" in dropped[radix.name]


@pytest.mark.l0
def test_ties_go_to_the_default():
    a, b = configs.NormConfig(8, 1, 2), configs.NormConfig(8, 1, 4)
    recs = [_rec("rms_norm", a), _rec("rms_norm", b, default=True)]
    ranked = tunable.rank("rms_norm", ARCH, recs, 16384, 2048, 0, "bfloat16")
    assert ranked[0][0] == ranked[1][0] and ranked[0][1]["config_name"] == b.name


# -- l1: real code objects, ranking, predicted entries, export ------------------------

@pytest.fixture(scope="module")
def records(compile_cache):
    """{op: sweep records} of the full gfx950 spaces of the three ops (real compiles in
    workers, into the session's cold cache)."""
    pytest.importorskip("flydsl")
    pytest.importorskip("ziglang")
    return {op: tunable.compiled_records(ARCH, op, cache_dir=compile_cache)
            for op in tunable.MEMORY_OPS}


@pytest.mark.l1
@pytest.mark.heavy
def test_candidates_are_the_compiled_spaces(records, compile_cache, monkeypatch):
    monkeypatch.setenv("XVENDOR_CACHE_DIR", str(compile_cache))
    info = devices.hypothetical(ARCH)
    for op in tunable.MEMORY_OPS:
        cands = tunable.TUNABLE.candidates(op, info, None)
        want = {c.name for t in configs.OP_TEMPLATES[op] for c in configs.candidates(ARCH, t)}
        assert {c.name for c in cands} == want
        for c in cands:  # pruning works from real code objects
            r = c.record
            assert r["cached"] and r["ok"], (op, c.name, r["reason"])
            assert r["spills"] == 0 and r["scratch"] == 0 and r["code_object_bytes"] > 1000
            assert r["required"] and all(n > 0 for n in r["required"].values())
            assert r["lds_bytes"] <= devices.ARCHS[ARCH].lds_bytes and r["occupancy"] >= 1
    assert tunable.TUNABLE.default_name(ARCH, "rms_norm_backward") == \
        configs.NORM_BWD_DEFAULTS[ARCH].name


@pytest.mark.l1
@pytest.mark.heavy
def test_tuner_style_ranking_makes_predicted_entries(records):
    entries = tunable.predicted_entries(ARCH, records_for=lambda arch, op: records[op])
    assert len(entries) == len(tunable.SHAPES)  # every shape has a clean candidate
    from xvendor.tuning.problem import ProblemKey
    by_shape = {}
    for text, w in entries.items():
        key = ProblemKey.parse(text)
        assert key.backend == w["backend"] == "flydsl" and key.arch == ARCH
        assert w["provenance"]["kind"] == "predicted" and w["measured_us"] is None
        names = {c.name for t in configs.OP_TEMPLATES[key.op]
                 for c in configs.candidates(ARCH, t)}
        assert w["config_name"] in names
        # never faster than moving the input once at full bandwidth
        assert w["predicted_us"] >= key.m * key.n * 2 / BW * 1e6
        by_shape[w["provenance"]["shape"]] = w
    assert by_shape["DeepSeek-V3 router, 256 experts top-8"]["config"]["form"] == "router"
    assert by_shape["Qwen3 sampling, 151936 vocab top-50"]["config"]["form"] == "radix"
    # the tunable's own ranking (what the tuner calls) agrees with the entries
    info = devices.hypothetical(ARCH)
    from xvendor.tuning.tuner import Candidate
    cands = [Candidate(r["config_name"], r["config"], r) for r in records["rms_norm_backward"]]
    key = tunable.problem_key("rms_norm_backward", ARCH, 16384, 8192)
    ranked, dropped = tunable.TUNABLE.rank("rms_norm_backward", info, key, cands)
    assert not dropped and len(ranked) == len(cands)
    assert tunable.TUNABLE.rank("gemm", info, key, cands) is None  # the GEMM model's job
    assert ranked[0][1]["config_name"] == \
        by_shape["Llama-70B norm backward, 16k tokens"]["config_name"]


@pytest.mark.l1
@pytest.mark.heavy
def test_export_writes_flydsl_artifacts_its_loader_accepts(records, tmp_path):
    from flydsl.autotune import Autotuner, Config

    from xvendor.tuning.flydsl_export import export_store
    from xvendor.tuning.problem import ProblemKey
    from xvendor.tuning.store import TuningStore, Winner
    spec = archs.arch_spec(ARCH)
    store = TuningStore(ARCH, spec.cus, directory=tmp_path / "tuning")
    entries = tunable.predicted_entries(ARCH, records_for=lambda arch, op: records[op])
    for text, w in entries.items():  # as the chip's own table would hold them
        key = ProblemKey.parse(text)
        store.put(ProblemKey(**{**key.__dict__, "cus": spec.cus, "product": spec.product}),
                  Winner(**w))
    written = export_store(store, tmp_path / "fly", product=spec.product)
    ours = {"xvendor-rms-norm", "xvendor-rms-norm-backward", "xvendor-topk"}
    pairs = [(p, json.loads(p.read_text())) for p in written]  # + the shipped GEMM ones
    pairs = [(p, d) for p, d in pairs if d["identity"]["name"] in ours]
    assert len(pairs) == len(entries)
    paths, data = [p for p, _ in pairs], [d for _, d in pairs]
    assert {d["identity"]["name"] for d in data} == ours
    assert {d["provenance"]["kind"] for d in data} == {"predicted"}

    def kernel(x, M: int, N: int, K: int, G: int, dtype: str, layout: str, **compile_opts):
        return x

    axes = ["M", "N", "K", "G", "dtype", "layout"]
    for path, d in zip(paths, data):
        tuner = Autotuner(kernel, [Config(vec=1)], axes, 1, 1,
                          artifact_name=d["identity"]["name"])
        key = d["identity"]["key"]
        cfg = tuner._load_artifact((path, d["identity"]), ("x", *(key[a] for a in axes)), {})
        assert cfg is not None, path.name  # FlyDSL's loader took it (else it logs why)
        assert cfg.all_kwargs() == d["config"]
        op = d["identity"]["name"].removeprefix("xvendor-").replace("-", "_")
        fields = configs.TopkConfig if op == "topk" else configs.NormConfig
        assert set(d["config"]) == set(fields.__dataclass_fields__)


@pytest.mark.l1
def test_gfx1250_defaults_and_variants_compile_clean_through_the_sweep(compile_cache):
    """The new templates' variants (fp32, no weight, smallest, fused residual) through the
    sweep's workers, i.e. ``crosscompile.compile_one``, on the wave32 arch."""
    pytest.importorskip("flydsl")
    pytest.importorskip("ziglang")
    from xvendor.tuning import sweep
    templates = ("rms_norm_bwd", "topk:router", "topk:radix")
    names = [v for t in templates for v in (t, *configs.VARIANTS[t])] + ["rms_norm:residual"]
    jobs = [(n, "gfx1250", configs.default("gfx1250", n)) for n in names]
    recs = sweep.sweep("flydsl", jobs=jobs, cache_dir=compile_cache)
    for r in recs:
        assert r["ok"] and r["spills"] == 0, (r["template"], r["reason"])
        assert r["mma_instr"] is None and r["required"]  # no matrix math, wide accesses
        assert all(n > 0 for n in r["required"].values())
