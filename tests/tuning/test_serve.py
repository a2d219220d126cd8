"""The dispatch layer serves tuned winners from the store; capture records problem keys."""

import json
import sys
import types

import pytest
import torch

import xvendor
from xvendor import devices, reference, registry
from xvendor.tuning import serve
from xvendor.tuning.problem import key_for
from xvendor.tuning.store import TuningStore, Winner

pytestmark = pytest.mark.l0


@pytest.fixture
def tuning_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    serve.clear_capture()
    registry.reset()  # the hook and its stores are read again for this directory
    yield tmp_path
    serve.clear_capture()


def _backend_counting_calls():
    mod = types.ModuleType("xvendor_test_tunedcpu")
    mod.CALLS = []
    mod.KERNELS = {"gemm": lambda *a: (mod.CALLS.append(a), reference.gemm(*a))[1]}
    sys.modules[mod.__name__] = mod
    xvendor.register(registry.Backend(name="tunedcpu", module=mod.__name__, ops={"gemm"},
                                      device_types={"cpu"}))
    return mod


def test_a_stored_winner_is_served_for_its_shape_only(tuning_dir):
    mod = _backend_counting_calls()
    info = devices.detect("cpu")
    a, b = torch.randn(100, 64), torch.randn(64, 32)
    key = key_for("gemm", "*", info.arch, info.cu_count, info.product, (a, b, None, None))
    TuningStore(info.arch, info.cu_count).put(key, Winner(
        "tunedcpu", {}, "default", 1.0, provenance={"kind": "measured", "device": "cpu"}))
    registry.reset()  # a table now exists: the hook returns its lookup
    torch.testing.assert_close(xvendor.gemm(a, b), a @ b)
    assert len(mod.CALLS) == 1
    assert xvendor.explain("gemm", a, b).backend == "tunedcpu"  # explain() sees the tuned winner
    xvendor.gemm(torch.randn(100, 64), torch.randn(64, 48))  # another N: not tuned -> aten
    assert len(mod.CALLS) == 1
    xvendor.gemm(torch.randn(120, 64), torch.randn(64, 32))  # same M bucket (128): served
    assert len(mod.CALLS) == 2


def test_no_table_no_hook(tuning_dir):
    assert serve.hook() is None  # no table for this machine's chips, no capture
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    xvendor.gemm(a, b)
    # the hot path stays shape-blind: the decision was made without a shape class
    assert registry.decide("gemm", a.device, a.dtype, (a, b, None, None)).shape_class is None


def test_capture_writes_the_problem_keys(tuning_dir, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNE", "capture")
    monkeypatch.setenv("XVENDOR_TUNE_CAPTURE", str(tuning_dir / "seen.json"))
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
