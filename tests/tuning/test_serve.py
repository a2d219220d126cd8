"""The dispatch layer serves tuned winners from the store; capture records problem keys."""

import json
import sys
import types

import pytest
import torch

import xvendor
from xvendor import devices, reference, registry
from xvendor.tuning import serve
from xvendor.tuning.store import TuningStore, Winner

pytestmark = pytest.mark.l0


@pytest.fixture
def tuning_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    serve._stores.clear()
    serve._captured.clear()
    yield tmp_path
    serve._stores.clear()
    serve._captured.clear()


def _backend_counting_calls():
    mod = types.ModuleType("xvendor_test_tunedcpu")
    mod.CALLS = []
    mod.KERNELS = {"gemm": lambda *a: (mod.CALLS.append(a), reference.gemm(*a))[1]}
    sys.modules[mod.__name__] = mod
    xvendor.register(registry.Backend(name="tunedcpu", module=mod.__name__, ops={"gemm"},
                                      device_types={"cpu"}))
    return mod


def test_a_stored_winner_is_served_for_its_shape_only(tuning_dir):
    from xvendor.ops.gemm import shape_class
    mod = _backend_counting_calls()
    info = devices.detect("cpu")
    a, b = torch.randn(100, 64), torch.randn(64, 32)
    key = serve._key("gemm", info, torch.float32, shape_class(a, b, None, None))
    TuningStore(info.arch, info.cu_count).put(key, Winner(
        "tunedcpu", {}, "default", 1.0, provenance={"kind": "measured", "device": "cpu"}))
    registry._registry.tuning_checked = False  # a table now exists: the hook installs itself
    registry.reset()
    torch.testing.assert_close(xvendor.gemm(a, b), a @ b)
    assert len(mod.CALLS) == 1
    assert xvendor.explain("gemm", a, b).backend == "aten"  # explain() is shape-blind here
    xvendor.gemm(torch.randn(100, 64), torch.randn(64, 48))  # another N: not tuned -> aten
    assert len(mod.CALLS) == 1
    xvendor.gemm(torch.randn(120, 64), torch.randn(64, 32))  # same M bucket (128): served
    assert len(mod.CALLS) == 2


def test_no_table_no_hook(tuning_dir):
    registry._registry.tuning_checked = False
    registry.reset()
    xvendor.gemm(torch.randn(4, 4), torch.randn(4, 4))
    assert registry._registry.tuned_lookup is None  # the hot path stays shape-blind


def test_capture_writes_the_problem_keys(tuning_dir, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNE", "capture")
    monkeypatch.setenv("XVENDOR_TUNE_CAPTURE", str(tuning_dir / "seen.json"))
    registry._registry.tuning_checked = False
    registry.reset()
    xvendor.gemm(torch.randn(300, 64), torch.randn(64, 32))
    xvendor.gemm(torch.randn(310, 64), torch.randn(64, 32))  # same bucket: one key
    xvendor.grouped_mm(torch.randn(10, 8), torch.randn(2, 8, 4), torch.tensor([4, 10], dtype=torch.int32))
    path = serve.write_capture()
    keys = serve.captured_keys(path)
    assert sorted(k.op for k in keys) == ["gemm", "grouped_mm"]
    g = next(k for k in keys if k.op == "gemm")
    assert (g.m, g.n, g.k, g.layout, g.backend) == (512, 32, 64, "NN", "*")
    assert json.loads(path.read_text())["keys"]
