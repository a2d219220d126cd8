"""The shipped gfx950/gfx1250 tables: predictions with provenance, valid configs, served."""

import json

import pytest
import torch

from xvendor import devices
from xvendor.tuning import serve, shipped
from xvendor.tuning.problem import ProblemKey
from xvendor.tuning.store import SHIPPED

pytestmark = pytest.mark.l0


@pytest.mark.parametrize("arch", ["gfx950", "gfx1250"])
def test_tables_exist_with_provenance_and_cover_the_shapes(arch):
    data = json.loads((SHIPPED / f"{arch}-anycu.json").read_text())
    assert data["arch"] == arch and data["cus"] == 0
    assert len(data["entries"]) == len(shipped.SHAPES)
    for key, w in data["entries"].items():
        k = ProblemKey.parse(key)
        assert k.arch == arch and k.backend == "triton"  # never a "*" default from a guess
        assert w["provenance"]["kind"] == "predicted" and w["measured_us"] is None
        assert w["predicted_us"] > 0


@pytest.mark.parametrize("arch", ["gfx950", "gfx1250"])
def test_shipped_configs_passed_the_cross_compile_checks(arch):
    from xvendor.triton import configs
    data = json.loads((SHIPPED / f"{arch}-anycu.json").read_text())
    names = {c.name for t in ("gemm", "grouped_mm") for c in configs.candidates(arch, t)}
    for w in data["entries"].values():
        assert w["config_name"] in names  # a config of that arch's space
        assert configs.Config(**w["config"]).name == w["config_name"]


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
