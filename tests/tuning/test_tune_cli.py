"""``xvendor tune --from``: every problem a real MoE training step captures can be tuned.

Regression: the backward pass captures 2Dx2D (weight gradient) and transposed 2Dx3D keys;
``make_args`` used to raise for them and, since 2Dx2D sorts first, the command exited 2
before tuning anything.
"""

import pytest
import torch

import xvendor
from xvendor import cli, devices, registry
from xvendor.testing import cpu_tunable
from xvendor.tuning import serve
from xvendor.tuning.problem import ProblemKey, key_for
from xvendor.tuning.tune_cli import make_args


@pytest.mark.l0
@pytest.mark.parametrize("layout", ["2Dx3D:NN", "2Dx3D:NT", "3Dx2D:NN", "3Dx2D:TN",
                                    "2Dx2D:TN", "2Dx2D:NT", "3Dx3D:NN", "3Dx3D:TT"])
def test_make_args_gives_inputs_whose_key_is_the_key(layout):
    info = devices.detect("cpu")
    key = ProblemKey("grouped_mm", "*", info.arch, info.cu_count, info.product, "float32",
                     "float32", layout, 64, 24, 40, 4)
    args = make_args(key, torch.device("cpu"), torch.Generator().manual_seed(0))
    assert key_for("grouped_mm", "*", info.arch, info.cu_count, info.product, args) == key
    xvendor.grouped_mm(*args)  # and the op accepts them


@pytest.mark.l0
def test_a_key_without_generator_is_skipped_with_its_reason(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    info = devices.detect("cpu")
    bad = ProblemKey("grouped_mm", "*", info.arch, info.cu_count, info.product, "float32",
                     "float32", "4Dx4D:NN", 8, 8, 8, 2)
    good = ProblemKey("gemm", "*", info.arch, info.cu_count, info.product, "float32",
                      "float32", "NN", 64, 32, 64, 0)
    path = tmp_path / "keys.json"
    path.write_text('{"keys": ["%s", "%s"]}' % (bad, good))
    xvendor.register(cpu_tunable.backend_record())
    assert cli.main(["tune", "--from", str(path), "--top-k", "2", "--backend", "cpublocked"]) == 0
    out = capsys.readouterr().out
    assert "4Dx4D" in out and "skipped" in out and "unknown grouped_mm form" in out
    assert "1 winner(s) stored, 1 skipped" in out


@pytest.mark.l1
def test_capture_a_moe_step_forward_and_backward_then_tune_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    monkeypatch.setenv("XVENDOR_TUNE", "capture")
    monkeypatch.setenv("XVENDOR_TUNE_CAPTURE", str(tmp_path / "moe.json"))
    serve.clear_capture()
    registry.reset()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 32, generator=g, requires_grad=True)
    w = torch.randn(4, 32, 24, generator=g, requires_grad=True)
    offs = torch.tensor([9, 9, 30, 40], dtype=torch.int32)  # an empty expert
    xvendor.grouped_mm(x, w, offs).square().sum().backward()
    path = serve.write_capture()
    layouts = {k.layout for k in serve.captured_keys(path)}
    assert {"2Dx3D:NN", "2Dx3D:NT", "2Dx2D:TN"} <= layouts  # forward, dgrad, wgrad
    monkeypatch.delenv("XVENDOR_TUNE")
    serve.clear_capture()
    registry.reset()
    rc = cli.main(["tune", "--from", str(path), "--backend", "sycl", "--top-k", "1",
                   "--dtype", "float32"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "skipped:" not in out
    assert f"{len(layouts)} winner(s) stored, 0 skipped" in out
