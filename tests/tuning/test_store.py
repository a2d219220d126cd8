"""Problem keys, the tuning store (atomic, concurrent, refuses foreign files), pruning and
the analytical ranking."""

import json
import multiprocessing as mp

import pytest
import torch

from xvendor.testing.tuning_workers import put_many
from xvendor.tuning import model
from xvendor.shapes import m_bucket as bucket_m, pow2_bucket as bucket_groups
from xvendor.tuning.problem import KEY_VERSION, ProblemKey, key_for
from xvendor.tuning.store import TuningStore, Winner

pytestmark = pytest.mark.l0


@pytest.mark.parametrize("m,bucket", [(0, 0), (1, 1), (3, 4), (100, 128), (256, 256), (257, 512),
                                      (1000, 1024), (1025, 1280), (4097, 4352)])
def test_m_bucketing(m, bucket):
    assert bucket_m(m) == bucket


def test_group_bucketing_and_key_round_trip():
    assert [bucket_groups(g) for g in (1, 3, 8, 9, 128)] == [1, 4, 8, 16, 128]
    a, w = torch.randn(300, 64), torch.randn(8, 32, 64).transpose(-2, -1)
    key = key_for("grouped_mm", "triton", "gfx950", 256, "MI355X", (a, w, torch.zeros(8, dtype=torch.int32), None, torch.float32))
    assert (key.layout, key.m, key.n, key.k, key.groups, key.out_dtype) == ("2Dx3D:NT", 512, 32, 64, 8, "float32")
    assert ProblemKey.parse(str(key)) == key and key.version == KEY_VERSION
    g = key_for("gemm", "reference", "cpu", 2, "host", (torch.randn(5, 7), torch.randn(9, 7).t(), None, None))
    assert (g.layout, g.m, g.n, g.k) == ("NT", 8, 9, 7)


def _key(arch="gfx950", cus=256, n=512):
    return ProblemKey("gemm", "triton", arch, cus, "MI355X", "bfloat16", "bfloat16", "NN", 4096, n, 4096)


def test_put_get_and_provenance(tmp_path):
    store = TuningStore("gfx950", 256, tmp_path)
    w = Winner("triton", {"block_m": 128}, "128x128", 10.0, 12.0,
               {"kind": "measured", "device": "MI355X", "date": "2026-11-29", "versions": {"triton": "3.9"}})
    store.put(_key(), w)
    again = TuningStore("gfx950", 256, tmp_path).get(_key())
    assert again == w and again.measured
    data = json.loads((tmp_path / "gfx950-256cu.json").read_text())
    assert data["arch"] == "gfx950" and data["key_version"] == KEY_VERSION


def test_a_key_for_another_chip_is_refused(tmp_path):
    with pytest.raises(ValueError, match="does not belong"):
        TuningStore("gfx950", 256, tmp_path).put(_key(arch="gfx1250"), Winner("t", {}, "x"))


@pytest.mark.parametrize("content,why", [
    ("{not json", "corrupted"),
    ('{"version": 1, "key_version": 1, "arch": "gfx950", "cus": 256, "entr', "corrupted"),  # truncated
    ('{"version": 99, "key_version": 1, "arch": "gfx950", "cus": 256, "entries": {}}', "another version"),
    ('{"version": 1, "key_version": 1, "arch": "gfx1250", "cus": 256, "entries": {}}', "never a config for another chip"),
])
def test_untrustworthy_files_are_ignored_with_one_warning(tmp_path, content, why):
    (tmp_path / "gfx950-256cu.json").write_text(content)
    with pytest.warns(UserWarning, match=why):
        store = TuningStore("gfx950", 256, tmp_path)
    assert store.get(_key()) is None
    store.put(_key(), Winner("triton", {}, "fresh"))  # a bad file is replaced, not a crash
    assert TuningStore("gfx950", 256, tmp_path).get(_key()).config_name == "fresh"


def test_concurrent_writers_lose_nothing(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=put_many, args=(str(tmp_path), "gfx950", 256, w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    store = TuningStore("gfx950", 256, tmp_path)
    assert len(store.entries) == 100  # 4 writers x 25 entries, none lost to a race
    assert not list(tmp_path.glob("*.tmp"))


def _rec(name, bm, bn, bk, ok=True, occ=2):
    return {"config_name": name, "ok": ok, "reason": "" if ok else "spills 12 VGPRs",
            "config": {"block_m": bm, "block_n": bn, "block_k": bk}, "occupancy": occ}


def test_pruning_from_a_report():
    recs = [_rec("big", 256, 256, 64), _rec("mid", 128, 128, 64), _rec("spill", 128, 64, 32, ok=False),
            _rec("small", 32, 32, 32)]
    kept, dropped = model.prune(recs, m=64, n=64, k=4096)
    assert {r["config_name"] for r in kept} == {"small"}
    assert "did not pass the cross-compile checks: spills" in dropped["spill"]
    assert "tile larger than the problem: BLOCK_M=256 > 64" in dropped["big"]
    kept, _ = model.prune(recs, m=8192, n=8192, k=8192)
    assert {r["config_name"] for r in kept} == {"big", "mid", "small"}


def test_ranking_prefers_the_obvious():
    # A 4096^3 problem: a 128x128 tile beats 16x16 tiles (MMA starvation, 64x more tiles).
    order = [r["config_name"] for _, r in model.rank(
        [_rec("tiny", 16, 16, 32), _rec("good", 128, 128, 64)], 4096, 4096, 4096, 0, "bfloat16", "gfx950")]
    assert order == ["good", "tiny"]
    # A 64x64 problem: a 256x256 tile wastes 15/16 of its work; the fitting tile wins.
    order = [r["config_name"] for _, r in model.rank(
        [_rec("huge", 256, 256, 64), _rec("fit", 64, 64, 64)], 64, 64, 4096, 0, "bfloat16", "gfx950")]
    assert order == ["fit", "huge"]
    # Higher occupancy never predicts slower.
    t1 = model.predict_us(8192, 8192, 8192, 0, "bfloat16", {"block_m": 128, "block_n": 128}, 1, "gfx950")
    t2 = model.predict_us(8192, 8192, 8192, 0, "bfloat16", {"block_m": 128, "block_n": 128}, 2, "gfx950")
    assert t2 <= t1


def test_rank_correlation():
    assert model.rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert model.rank_correlation([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    assert model.rank_correlation([1], [2]) != model.rank_correlation([1], [2])  # nan
