"""The shipped gfx950/gfx1250 tables: predictions with provenance, valid configs, served.

Each table holds one entry per (toolchain, GEMM-family shape) and one per FlyDSL
memory-bound shape (rms_norm, rms_norm_backward, topk: ``xvendor.rocm.tunable.SHAPES``)."""

import json

import pytest
import torch

from xvendor import devices
from xvendor.tuning import serve, shipped
from xvendor.tuning.problem import ProblemKey
from xvendor.tuning.store import SHIPPED, TuningStore

pytestmark = pytest.mark.l0
MEMORY_OPS = ("rms_norm", "rms_norm_backward", "topk")


def _memory_shapes():
    from xvendor.rocm import tunable
    return tunable.SHAPES


@pytest.mark.parametrize("arch", ["gfx950", "gfx1250"])
def test_tables_exist_with_provenance_and_cover_the_shapes(arch):
    data = json.loads((SHIPPED / f"{arch}-anycu.json").read_text())
    assert data["arch"] == arch and data["cus"] == 0
    assert len(data["entries"]) == len(shipped.SHAPES) * len(shipped.TOOLCHAINS) \
        + len(_memory_shapes())
    rows = {(k.op, k.m, k.n, k.k) for k in map(ProblemKey.parse, data["entries"])
            if k.op in MEMORY_OPS}
    assert rows == {(op, r, n, k) for _, op, r, n, k in _memory_shapes()}
    for key, w in data["entries"].items():
        k = ProblemKey.parse(key)
        # one entry per toolchain and shape; never a "*" default from a guess
        assert k.arch == arch and k.backend in shipped.TOOLCHAINS and w["backend"] == k.backend
        assert w["provenance"]["kind"] == "predicted" and w["measured_us"] is None
        assert w["predicted_us"] > 0


@pytest.mark.parametrize("arch", ["gfx950", "gfx1250"])
def test_shipped_configs_passed_the_cross_compile_checks(arch):
    from xvendor.rocm import configs as flydsl_configs
    from xvendor.triton import configs as triton_configs
    spaces = {"triton": triton_configs, "flydsl": flydsl_configs}
    data = json.loads((SHIPPED / f"{arch}-anycu.json").read_text())
    for key, w in data["entries"].items():
        configs = spaces[w["backend"]]
        op = ProblemKey.parse(key).op
        if op in MEMORY_OPS:  # FlyDSL only; the template that runs it, its config kind
            template = w["provenance"]["template"]
            assert w["backend"] == "flydsl" and template in flydsl_configs.OP_TEMPLATES[op]
            names = {c.name for c in flydsl_configs.candidates(arch, template)}
            cfg = flydsl_configs.config_from(template, w["config"])
        else:
            names = {c.name for t in ("gemm", "grouped_mm") for c in configs.candidates(arch, t)}
            cfg = configs.Config(**w["config"])
        assert w["config_name"] in names  # a config of that arch's space
        assert cfg.name == w["config_name"] and cfg.to_dict() == w["config"]


def test_served_to_a_real_chip_of_that_arch_whatever_its_cu_count(tmp_path, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    serve.clear_stores()
    info = devices.hypothetical("gfx950")
    sc = ("2Dx3D:NT", 32768, 4096, 7168, 256, "bfloat16")
    w = serve.config_for("triton", "grouped_mm", info, torch.bfloat16, sc)
    assert w is not None and not w.measured and w.provenance["shape"].startswith("DeepSeek-V3")
    assert serve.lookup("grouped_mm", info, torch.bfloat16, sc) is None  # no "*" from a guess
    other = devices.hypothetical("gfx942")
    assert serve.config_for("triton", "grouped_mm", other, torch.bfloat16, sc) is None
    fly = serve.config_for("flydsl", "grouped_mm", info, torch.bfloat16, sc)
    assert fly is not None and fly.provenance["kind"] == "predicted"
    assert fly.provenance["from"].startswith("flydsl cross-compile records")


def test_generate_ranks_each_toolchains_own_records():
    """The loop up to ranking: pruned by the records, ranked by the model, per toolchain."""
    def records(toolchain, arch, template):
        ok = {"ok": True, "occupancy": 2}
        return [dict(ok, config_name=f"{toolchain}-small", config={"block_m": 16,
                     "block_n": 16, "block_k": 16}),
                dict(ok, config_name=f"{toolchain}-big", config={"block_m": 128,
                     "block_n": 128, "block_k": 64}),
                {"ok": False, "reason": "spills", "config_name": f"{toolchain}-spills",
                 "config": {"block_m": 256, "block_n": 256, "block_k": 64}}]
    data = shipped.generate("gfx950", records_for=records, memory_bound=lambda arch: {})
    picked = {(ProblemKey.parse(k).backend, ProblemKey.parse(k).m, ProblemKey.parse(k).n):
              w["config_name"] for k, w in data["entries"].items()}
    for tc in ("triton", "flydsl"):
        assert picked[(tc, 32768, 4096)] == f"{tc}-big"  # a big MoE problem: the big tile
        assert picked[(tc, 64, 8192)] == f"{tc}-small"  # decode: 128 rows > 64 is pruned
    assert not any(name.endswith("-spills") for name in picked.values())


def test_memory_bound_entries_are_flydsls_only():
    """generate() adds the memory-bound predictions when FlyDSL is among the toolchains."""
    calls = []

    def memory_bound(arch):
        calls.append(arch)
        return {"rms_norm|flydsl|gfx950|0|*|bfloat16|bfloat16|rows|64|8192|0|0|1": {"x": 1}}

    def records(toolchain, arch, template):
        return [{"ok": True, "occupancy": 2, "config_name": "t", "config": {
            "block_m": 64, "block_n": 64, "block_k": 32}}]
    both = shipped.generate("gfx950", records, memory_bound=memory_bound)["entries"]
    assert calls == ["gfx950"] and sum("|rows|" in k for k in both) == 1
    triton = shipped.generate("gfx950", records, ("triton",), memory_bound)["entries"]
    assert calls == ["gfx950"] and not any("|rows|" in k for k in triton)


@pytest.mark.parametrize("arch", ["gfx950", "gfx1250"])
def test_memory_bound_predictions_are_found_for_a_chip_of_that_arch(arch, tmp_path):
    """The shipped rms_norm/topk entries answer the keys ``xvendor tune --shape`` builds for
    a chip of the arch, whatever its CU count; the router shapes got the router form, the
    vocabulary rows the radix form."""
    from xvendor.rocm.tunable import problem_key
    store = TuningStore(arch, 304, tmp_path)
    for label, op, rows, n, k in _memory_shapes():
        w = store.get(problem_key(op, arch, rows, n, k, cus=304, product="some MI chip"))
        assert w is not None and w.provenance["kind"] == "predicted", label
        assert w.provenance["shape"] == label and w.predicted_us > 0
        if op == "topk":
            assert w.config["form"] == ("router" if n <= 256 else "radix"), label
