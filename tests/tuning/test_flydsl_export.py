"""Tuned winners exported in FlyDSL's artifact format are accepted by FlyDSL's own loader."""

import pytest

from xvendor.tuning import flydsl_export

pytestmark = [pytest.mark.l1, pytest.mark.requires_toolchain("flydsl")]


def test_flydsl_loads_what_we_export(tmp_path):
    from flydsl.autotune import Autotuner, Config

    def grouped_gemm(a, b, M: int, N: int, BLOCK_M: int = 64, BLOCK_N: int = 64, **compile_opts):
        return a

    tuner = Autotuner(grouped_gemm, [Config(BLOCK_M=64, BLOCK_N=64)], ["M", "N"], 1, 1,
                      artifact_name="xv-grouped-gemm")
    ident = flydsl_export.identity("xv-grouped-gemm", {"M": 4096, "N": 7168},
                                   "AMD Instinct MI355X", "gfx950", 256)
    path = flydsl_export.write_artifact(tmp_path, "xv-grouped-gemm", ident,
                                        {"BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8})
    cfg = tuner._load_artifact((path, ident), ("a", "b", 4096, 7168), {})
    assert cfg is not None, "FlyDSL refused the artifact (see its warning)"
    assert cfg.all_kwargs()["BLOCK_M"] == 256 and cfg.num_warps == 8
    wrong = flydsl_export.identity("xv-grouped-gemm", {"M": 4096, "N": 7168},
                                   "AMD Instinct MI355X", "gfx942", 304)
    assert Autotuner(grouped_gemm, [Config(BLOCK_M=64)], ["M", "N"], 1, 1,
                     artifact_name="xv-grouped-gemm")._load_artifact((path, wrong), ("a", "b", 4096, 7168), {}) is None


def test_export_store_writes_only_flydsl_winners(tmp_path):
    import json

    from xvendor.tuning.problem import ProblemKey
    from xvendor.tuning.store import TuningStore, Winner
    store = TuningStore("gfx950", 256, tmp_path / "tables")
    k = ProblemKey("grouped_mm", "flydsl", "gfx950", 256, "AMD Instinct MI355X", "bfloat16",
                   "bfloat16", "2Dx3D:NT", 32768, 4096, 7168, 256)
    store.put(k, Winner("flydsl", {"block_m": 256, "block_n": 128, "stages": 3}, "256x128",
                        100.0, provenance={"kind": "measured"}))
    store.put(ProblemKey(**{**k.__dict__, "backend": "triton"}), Winner("triton", {}, "t"))
    (path,) = flydsl_export.export_store(store, tmp_path / "fly")
    data = json.loads(path.read_text())
    assert data["identity"]["name"] == "xvendor-grouped-mm"
    assert data["identity"]["key"]["M"] == 32768 and data["identity"]["device"]["arch"] == "gfx950"
    assert data["config"] == {"block_m": 256, "block_n": 128, "stages": 3}


def test_predicted_winners_export_marked_and_flydsl_loads_them(tmp_path, capsys):
    """On a machine without the chip, the shipped predictions are what there is to export:
    written for the named chip, marked predicted, and accepted by FlyDSL's own loader."""
    import json

    from flydsl.autotune import Autotuner, Config

    from xvendor import cli
    out = tmp_path / "fly"
    assert cli.main(["tune", "--export-flydsl", str(out), "--arch", "gfx950"]) == 0
    assert "(predicted)" in capsys.readouterr().out
    paths = sorted(out.glob("*.json"))
    assert len(paths) == _shipped_count("gfx950") == 22
    names = {json.loads(p.read_text())["identity"]["name"] for p in paths}
    assert names == {"xvendor-gemm", "xvendor-grouped-mm", "xvendor-rms-norm",
                     "xvendor-rms-norm-backward", "xvendor-topk"}
    data = [json.loads(p.read_text()) for p in paths]
    assert {d["provenance"]["kind"] for d in data} == {"predicted"}
    assert {d["identity"]["device"]["arch"] for d in data} == {"gfx950"}
    assert {d["identity"]["device"]["compute_units"] for d in data} == {256}
    first = next(d for d in data if d["identity"]["name"] == "xvendor-grouped-mm")

    def kernel(a, b, M: int, N: int, K: int, G: int, dtype: str, layout: str, **compile_opts):
        return a

    tuner = Autotuner(kernel, [Config(block_m=64)], ["M", "N", "K", "G", "dtype", "layout"],
                      1, 1, artifact_name="xvendor-grouped-mm")
    key = first["identity"]["key"]
    path = next(p for p, d in zip(paths, data) if d is first)
    cfg = tuner._load_artifact((path, first["identity"]), ("a", "b", key["M"], key["N"],
                                                             key["K"], key["G"],
                                                             key["dtype"], key["layout"]), {})
    assert cfg is not None and cfg.all_kwargs()["block_m"] == first["config"]["block_m"]


def test_nothing_to_export_is_refused_and_writes_nothing(tmp_path, capsys):
    from xvendor import cli
    out = tmp_path / "fly"
    assert cli.main(["tune", "--export-flydsl", str(out), "--device", "cpu"]) == 1
    assert "no flydsl winner" in capsys.readouterr().out and not out.exists()
    # gfx1250's CU count is not published: predictions have no device identity to match
    assert cli.main(["tune", "--export-flydsl", str(out), "--arch", "gfx1250"]) == 1
    assert "CU count" in capsys.readouterr().out and not out.exists()
    assert cli.main(["tune", "--export-flydsl", str(out), "--arch", "gfx1250",
                     "--cus", "256", "--product", "AMD Instinct MI455X"]) == 0
    assert len(list(out.glob("*.json"))) == _shipped_count("gfx1250")


def _shipped_count(arch: str) -> int:
    """The shipped FlyDSL predictions of ``arch``: one per GEMM-family shape and one per
    memory-bound shape (rms_norm, rms_norm_backward, topk)."""
    from xvendor.rocm import tunable
    from xvendor.tuning import shipped
    return len(shipped.SHAPES) + len(tunable.SHAPES)
