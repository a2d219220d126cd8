"""``xvendor tune`` for the memory-bound ops (rms_norm, rms_norm_backward, topk).

l0: the ``--shape`` forms and their keys, the generated inputs, the OpSpec gate (each op's
oracle and error hook, read as ``xvendor check`` reads them), and the whole loop (rank hook,
gate, time, store) on a real CPU RMSNorm whose config changes how it walks the rows.
l1: on this machine (no gfx950), ``xvendor tune --arch gfx950 --shape ...`` ranks FlyDSL's
real compile records with its memory-bound model, stores ``predicted`` entries, and
``--export-flydsl`` exports them in a form FlyDSL's own loader accepts. Not verified here:
gating and timing the FlyDSL kernels themselves (they launch only on a gfx950/gfx1250).
"""

import json

import pytest
import torch

from xvendor import cli, devices, reference
from xvendor.ops import SPECS
from xvendor.rocm.tunable import problem_key
from xvendor.tuning import tuner
from xvendor.tuning.store import TuningStore
from xvendor.tuning.tune_cli import make_args, parse_shape

MI355X = devices.arch_spec("gfx950").product  # what --arch gfx950 names the chip


@pytest.mark.l0
@pytest.mark.parametrize("text, op, rows, n, k", [
    ("rms_norm:16384x8192", "rms_norm", 16384, 8192, 0),
    ("rms_norm_backward:100x7000", "rms_norm_backward", 100, 7000, 0),
    ("topk:64x151936:50", "topk", 64, 151936, 50),
])
def test_shapes_parse_to_the_tunables_problem_keys(text, op, rows, n, k):
    info = devices.detect("cpu")
    key = parse_shape(text, info, "bfloat16")
    want = problem_key(op, info.arch, rows, n, k, "bfloat16", info.cu_count, info.product)
    assert key == type(want)(**{**want.__dict__, "backend": "*"})


@pytest.mark.l0
@pytest.mark.parametrize("text, says", [
    ("topk:64x1000", "expected topk:RxN:K"),
    ("rms_norm:64x1000:4", "expected rms_norm:RxH"),
    ("rms_norm:64", "expected rms_norm:RxH"),
    ("topk:64x100:101", "k must be in 1..100"),
    ("topk:64x100:0", "k must be in 1..100"),
    ("rms_norm_backward:0x128", "rows and row length must be >= 1"),
])
def test_bad_shapes_are_refused_with_the_rule(text, says):
    with pytest.raises(SystemExit, match=says):
        parse_shape(text, devices.detect("cpu"), "bfloat16")


@pytest.mark.l0
@pytest.mark.parametrize("op", ["rms_norm", "rms_norm_backward", "topk"])
def test_make_args_are_fresh_inputs_the_op_and_its_oracle_take(op):
    info = devices.detect("cpu")
    key = parse_shape({"topk": "topk:37x1001:9"}.get(op, f"{op}:37x1001"), info, "float32")
    gen = torch.Generator().manual_seed(0)
    args, again = make_args(key, torch.device("cpu"), gen), make_args(key, "cpu", gen)
    # the key holds the row bucket (37 rows -> 64, as GEMM keys bucket M): inputs are its size
    assert args[0].shape == (64, 1001) and args[0].dtype == torch.float32
    assert args[0].std() > 0.5 and not torch.equal(args[0], again[0])  # random, fresh
    if op == "topk":
        assert args[1:] == (9, -1, True, True)
    else:
        assert args[-2].shape == (1001,)  # the weight
    out = SPECS[op].function(*args)  # the public op accepts them
    assert tuner.gate(op, out, tuner.oracle(op, args), args) is None


def _rms_args(dtype=torch.float32, rows=37, n=1001):
    g = torch.Generator().manual_seed(1)
    return tuple(torch.randn(*s, generator=g).to(dtype) for s in ((rows, n), (n,))) + (1e-6,)


@pytest.mark.l0
def test_gate_fails_a_wrong_rms_norm_and_a_wrong_dtype():
    args = _rms_args()
    ref = tuner.oracle("rms_norm", args)
    good = reference.rms_norm(*args)
    assert tuner.gate("rms_norm", good, ref, args) is None
    assert "gate failed" in tuner.gate("rms_norm", good * 1.001, ref, args)
    assert "gate failed" in tuner.gate("rms_norm", good.half(), ref, args)  # not x's dtype


@pytest.mark.l0
def test_gate_reads_the_backward_hook_normalized():
    """rms_norm_backward's hook returns 0 within tolerance and error/tolerance (> 1) outside:
    a dweight off by 1% fails although its raw error is far below 1."""
    x, w, eps = _rms_args(n=300)
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(2))
    args = (grad, x, w, eps)
    ref = tuner.oracle("rms_norm_backward", args)
    dx, dw = reference.rms_norm_backward(*args)
    assert tuner.gate("rms_norm_backward", (dx, dw), ref, args) is None
    assert "gate failed" in tuner.gate("rms_norm_backward", (dx, dw * 1.01), ref, args)
    assert "gate failed" in tuner.gate("rms_norm_backward", (dx, dw.half()), ref, args)


@pytest.mark.l0
def test_gate_reads_topks_hook_as_a_plain_error():
    """topk's hook returns a plain normwise error (not normalized): values 30% off give
    0.3 < 1, which must still fail against the dtype's tolerance; indices that do not
    point at the values fail too."""
    x = torch.randn(50, 300, generator=torch.Generator().manual_seed(3))
    args = (x, 8, -1, True, True)
    ref = tuner.oracle("topk", args)
    values, idx = reference.topk(*args)
    assert tuner.gate("topk", (values, idx), ref, args) is None
    assert "gate failed" in tuner.gate("topk", (values * 1.3, idx), ref, args)
    assert "gate failed" in tuner.gate("topk", (values, idx.flip(-1)), ref, args)


class RowNorm:
    """A real tunable CPU RMSNorm for the loop: ``rows`` rows per torch call (small blocks
    pay per-call overhead, so the config changes the time). ``skip_weight`` makes a wrong
    candidate the gate must reject. Ranks itself (the hook the FlyDSL tunable has): fewer
    calls predicted faster."""

    SPACE = (1, 4, 16, 64)
    MODEL_NAME = "rows per call, test v0"

    def candidates(self, op, info, key):
        cands = [tuner.Candidate(f"r{r}", {"rows": r}) for r in self.SPACE]
        return cands + [tuner.Candidate("r64_wrong", {"rows": 64, "skip_weight": True}),
                        tuner.Candidate("r128_broken", {"rows": 128}, {"ok": False,
                                                                      "reason": "spills"})]

    def rank(self, op, info, key, cands):
        dropped = {c.name: "did not compile cleanly" for c in cands if c.record}
        ranked = [(key.m / c.config["rows"], dict(config=c.config, config_name=c.name))
                  for c in cands if not c.record]
        return sorted(ranked, key=lambda r: r[0]), dropped

    def run(self, op, config, args):
        x, w, eps = args
        w = None if config.get("skip_weight") else w
        step = config["rows"]
        return torch.cat([reference.rms_norm(x[i:i + step], w, eps)
                          for i in range(0, x.shape[0], step)])


@pytest.mark.l0
def test_the_loop_ranks_with_the_hook_gates_with_the_opspec_and_stores(tmp_path):
    info = devices.detect("cpu")
    key = parse_shape("rms_norm:300x257", info, "float32")
    gen = torch.Generator().manual_seed(0)
    argsets = [make_args(key, torch.device("cpu"), gen) for _ in range(3)]
    store = TuningStore(info.arch, info.cu_count, tmp_path)
    res = tuner.tune("rms_norm", "rownorm", RowNorm(), info, key, argsets, store)
    rows = {r.name: r for r in res.rows}
    assert rows["r128_broken"].status == "pruned: did not compile cleanly"
    wrong = rows["r64_wrong"]
    assert wrong.status.startswith("gate failed") and wrong.measured_us is None  # never timed
    assert all(rows[f"r{r}"].status == "timed" for r in RowNorm.SPACE)
    assert res.winner.measured_us == min(rows[f"r{r}"].measured_us for r in RowNorm.SPACE)
    assert res.model == RowNorm.MODEL_NAME and res.aten_us > 0
    own = TuningStore(info.arch, info.cu_count, tmp_path).get(
        type(key)(**{**key.__dict__, "backend": "rownorm"}))
    assert own.config_name == res.winner.name and own.measured


@pytest.mark.l0
def test_an_op_no_model_ranks_is_refused(tmp_path):
    """A tunable without a rank hook for a memory-bound op is not ranked with the GEMM model."""
    from xvendor.testing import cpu_tunable
    info = devices.detect("cpu")
    key = parse_shape("rms_norm:64x128", info, "float32")
    argsets = [make_args(key, "cpu", torch.Generator().manual_seed(0))]
    with pytest.raises(ValueError, match="does not rank 'rms_norm'"):
        tuner.tune("rms_norm", "cpublocked", cpu_tunable.TUNABLE, info, key, argsets,
                   TuningStore(info.arch, info.cu_count, tmp_path))


@pytest.mark.l1
@pytest.mark.requires_toolchain("flydsl")
@pytest.mark.heavy
def test_predict_store_and_export_for_gfx950(tmp_path, monkeypatch, capsys):
    """No gfx950 here: the loop stops after ranking FlyDSL's real compile records with the
    memory-bound model; the best prediction is stored marked predicted, then exported, and
    FlyDSL's own loader accepts the topk artifact (its ``form`` is a string kwarg)."""
    from flydsl.autotune import Autotuner, Config

    from xvendor.rocm import tunable
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path / "tables"))
    shapes = {"rms_norm": (16384, 8192, 0), "rms_norm_backward": (100, 7000, 0),
              "topk": (64, 151936, 50)}
    argv = ["tune", "--arch", "gfx950"]
    for op, (r, n, k) in shapes.items():
        argv += ["--shape", f"{op}:{r}x{n}" + (f":{k}" if k else "")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "3 prediction(s) stored for gfx950 (256 CUs)" in out and "pruned: the kernel" in out
    store = TuningStore("gfx950", 256)
    for op, (r, n, k) in shapes.items():
        key = problem_key(op, "gfx950", r, n, k, cus=256, product=MI355X)
        w = store.entries[str(key)]
        assert w.provenance["kind"] == "predicted" and w.measured_us is None
        assert w.provenance["model"] == "xvendor.rocm.tunable rank"
        best_us, best = tunable.rank(op, "gfx950", tunable.prune(
            op, "gfx950", tunable.compiled_records("gfx950", op), r, n, k, "bfloat16")[0],
            r, n, k, "bfloat16", 256)[0]
        assert (w.config_name, w.predicted_us) == (best["config_name"], best_us)
    assert store.entries[str(problem_key("topk", "gfx950", 64, 151936, 50, cus=256,
                                         product=MI355X))].config["form"] == "radix"
    fly = tmp_path / "fly"
    assert cli.main(["tune", "--export-flydsl", str(fly), "--arch", "gfx950"]) == 0
    once = tmp_path / "fly-once"  # one command: predict, store, export
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path / "tables-once"))
    assert cli.main(argv + ["--export-flydsl", str(once)]) == 0
    assert sorted(p.name for p in once.glob("*.json")) == sorted(p.name for p in fly.glob("*.json"))
    arts = [json.loads(p.read_text()) for p in sorted(fly.glob("xvendor-topk-*.json"))]
    art = next(a for a in arts if a["identity"]["key"]["N"] == 151936)
    assert art["provenance"]["kind"] == "predicted" and art["config"]["form"] == "radix"

    def kernel(x, M: int, N: int, K: int, G: int, dtype: str, layout: str, form: str = "router",
               vec: int = 4, waves: int = 4, k_max: int = 0, **compile_opts):
        return x

    key = art["identity"]["key"]
    path = next(p for p in fly.glob("xvendor-topk-*.json")
                if json.loads(p.read_text())["identity"] == art["identity"])
    cfg = Autotuner(kernel, [Config(form="router")], ["M", "N", "K", "G", "dtype", "layout"],
                    1, 1, artifact_name="xvendor-topk")._load_artifact(
        (path, art["identity"]), ("x", key["M"], key["N"], key["K"], key["G"], key["dtype"],
                                  key["layout"]), {})
    assert cfg is not None and cfg.all_kwargs()["form"] == "radix"
    assert cfg.all_kwargs()["k_max"] == art["config"]["k_max"]


@pytest.mark.l1
@pytest.mark.requires_toolchain("sycl")
def test_a_backend_that_cannot_rank_the_op_is_skipped_with_its_reason(tmp_path, monkeypatch,
                                                                     capsys):
    """SYCL serves rms_norm on the CPU but its tunable ranks only GEMM tiles: the problem is
    reported skipped, never tuned with GEMM tiles."""
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    rc = cli.main(["tune", "--shape", "rms_norm:64x1000", "--dtype", "float32",
                   "--backend", "sycl", "--device", "cpu"])
    out = capsys.readouterr().out
    assert rc == 1 and "skipped" in out and "does not rank 'rms_norm'" in out, out


@pytest.mark.l0
def test_a_stored_memory_bound_winner_reaches_the_kernel_for_its_shape_class_only(
        tmp_path, monkeypatch, recording_backend):
    """rms_norm, its backward and topk have shape classes (rows bucketed like GEMM's M), so a
    tuned config is served to the calls of its class and to no other."""
    from xvendor import registry
    from xvendor.ops import rms_norm, rms_norm_backward, topk
    from xvendor.tuning import serve
    from xvendor.tuning.problem import SHAPE_CLASS, from_shape_class
    from xvendor.tuning.store import Winner
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    mod = recording_backend("tunedrows", ("rms_norm", "rms_norm_backward", "topk"))
    try:
        info = devices.detect("cpu")
        g = torch.Generator().manual_seed(7)
        x, w = torch.randn(200, 96, generator=g), torch.randn(96, generator=g)
        calls = {"rms_norm": (x, w, None), "rms_norm_backward": (torch.randn_like(x), x, w, None),
                 "topk": (x, 5, -1, True, True)}
        store = TuningStore(info.arch, info.cu_count)
        for i, (op, args) in enumerate(calls.items()):
            key = from_shape_class(op, "tunedrows", info.arch, info.cu_count, info.product,
                                   x.dtype, SHAPE_CLASS[op](*args))
            store.put(key, Winner("tunedrows", {"vec": i}, f"v{i}", 1.0,
                                  provenance={"kind": "measured", "device": "cpu"}))
        registry.reset()  # a table now exists: the hook installs its lookup
        x2 = torch.randn(250, 96, generator=g)  # 250 rows: the same bucket (256) as 200
        rms_norm(x2, w, backend="tunedrows")
        rms_norm_backward(torch.randn_like(x2), x2, w, backend="tunedrows")
        topk(x2, 5, backend="tunedrows")
        assert mod.CONFIGS == [("rms_norm", {"vec": 0}), ("rms_norm_backward", {"vec": 1}),
                               ("topk", {"vec": 2})]
        rms_norm(torch.randn(200, 64), None, backend="tunedrows")  # another hidden size
        topk(x2, 6, backend="tunedrows")  # another k
        assert mod.CONFIGS[3:] == [("rms_norm", None), ("topk", None)]
    finally:
        serve.clear_capture()
