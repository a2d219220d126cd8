"""`xvendor check` / `info` / `explain`: real subprocesses for the happy path, and a
deliberately wrong kernel to prove that check can fail."""

import json
import subprocess
import sys
import types

import pytest
import torch

import xvendor
from xvendor import cli, reference, registry

pytestmark = pytest.mark.l0


def _xvendor(*args):
    return subprocess.run([sys.executable, "-m", "xvendor.cli", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.heavy
def test_check_json_passes_on_this_machine():
    proc = _xvendor("check", "--json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["ok"] and rep["devices"][0]["device"] == "cpu"
    ops = {(r["op"], r["dtype"]) for r in rep["correctness"]}
    assert {(op, dt) for op in registry.ops() for dt in ("float32", "float16", "bfloat16")} <= ops
    assert {d["arch"] for d in rep["dispatch_dry_run"]} >= {"gfx950", "gfx1250", "sm_90"}


def test_check_tables_print_pass():
    proc = _xvendor("check")
    assert proc.returncode == 0, proc.stderr
    for title in ("Devices", "Dispatch (present devices", "Correctness vs fp64 oracle"):
        assert title in proc.stdout
    assert "xvendor check: PASS" in proc.stdout


def test_check_fails_on_a_wrong_kernel(capsys):
    mod = types.ModuleType("xvendor_test_wrong")
    mod.KERNELS = {"gemm": lambda a, b, bias, out_dtype: reference.gemm(a, b, bias, out_dtype) * 1.01}
    sys.modules[mod.__name__] = mod
    xvendor.register(registry.Backend(name="wrong", module=mod.__name__, ops={"gemm"},
                                      device_types={"cpu"}, defaults={"gemm": {"cpu"}},
                                      evidence="deliberately wrong, for this test", priority=5))
    assert cli.main(["check"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "wrong" in out


def test_check_reports_the_backend_that_ran_and_fails_on_a_fallback():
    """Regression: a default that raises used to be shown as PASS under its own name."""
    mod = types.ModuleType("xvendor_test_raises")

    def broken(*args):
        raise RuntimeError("kernel launch failed")
    mod.KERNELS = {"gemm": broken}
    sys.modules[mod.__name__] = mod
    xvendor.register(registry.Backend(name="broken", module=mod.__name__, ops={"gemm"},
                                      device_types={"cpu"}, defaults={"gemm": {"cpu"}},
                                      evidence="raises, for this test", priority=5))
    with pytest.warns(UserWarning, match="'broken' failed"):
        rep = cli.check_report(dtypes=(torch.float32,))
    gemm_rows = [r for r in rep["correctness"] if r["op"] == "gemm"]
    first = gemm_rows[0]
    assert first["backend"] == "torch" and first["fell_back_from"] == "broken"
    assert not first["ok"] and "kernel launch failed" in first["error"]
    assert not rep["ok"]
    # Later rows: the broken default is no longer chosen; torch ran and says so.
    assert all(r["backend"] == "torch" for r in gemm_rows)


def test_info_json_lists_versions_and_backends():
    proc = _xvendor("info", "--json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["packages"]["torch"].startswith("2.")
    assert rep["backends"]["reference"] == rep["backends"]["torch"] == "available"


def test_explain_cli(capsys):
    assert cli.main(["explain", "grouped_mm", "--arch", "gfx950"]) == 0
    assert "gfx950" in capsys.readouterr().out
    assert cli.main(["explain", "gemm", "--backend", "nope"]) == 2


def test_toolchain_sections_count_in_the_verdict(monkeypatch, capsys):
    mod = types.ModuleType("xvendor_test_sections")
    mod.good = lambda: [{"target": "gfx950", "ok": True}]
    mod.bad = lambda: [{"target": "gfx1250", "ok": False, "reason": "spills"}]
    mod.broken = lambda: 1 / 0
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setattr(cli, "CHECK_SECTIONS", [("Good", f"{mod.__name__}:good")])
    assert cli.main(["check"]) == 0
    monkeypatch.setattr(cli, "CHECK_SECTIONS", [("Good", f"{mod.__name__}:good"),
                                                ("Bad", f"{mod.__name__}:bad")])
    assert cli.main(["check"]) == 1
    assert "failed sections: ['Bad']" in capsys.readouterr().out
    monkeypatch.setattr(cli, "CHECK_SECTIONS", [("Broken", f"{mod.__name__}:broken")])
    rep = cli.check_report()
    assert not rep["ok"] and "ZeroDivisionError" in rep["sections"]["Broken"][0]["error"]
