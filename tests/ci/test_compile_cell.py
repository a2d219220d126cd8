"""`xvendor ci compile --cell`: the project's own compile entry point, called with the
cell's cross-compile targets; its report, and a failing entry failing the step."""

import json

import pytest

from xvendor.ci import cli

pytestmark = pytest.mark.l0

MATRIX = """
[defaults]
torch = "2.15"
python = "3.11"

[[cell]]
vendor = "cpu"
arch = "cpu"
runtime = "cpu"
runner = "ubuntu-24.04"
tiers = ["l0"]
cross_compile = ["gfx950", "sm_100"]
compile_entry = "{entry}"
compile_templates = false
"""
KERNELS = '''
def compile_for(targets, out_dir):
    for t in targets:
        (out_dir / f"k.{t}.bin").write_text(t)
    return {t: f"k.{t}.bin" for t in targets}

def broken(targets, out_dir):
    raise RuntimeError("no backend for " + targets[0])
'''
CELL = "torch215-cxx11-cpu-x86_64-linux-py311"


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "ci").mkdir()
    (tmp_path / "mykernels_for_ci.py").write_text(KERNELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _compile(project, entry):
    (project / "ci" / "matrix.toml").write_text(MATRIX.format(entry=entry))
    rc = cli.main(["compile", "--cell", CELL, "--report", str(project / "r")])
    report = project / "r" / "compile-entry.json"
    return rc, json.loads(report.read_text()) if report.is_file() else None


def test_the_entry_point_compiles_for_the_cells_targets(project):
    rc, report = _compile(project, "mykernels_for_ci:compile_for")
    assert rc == 0 and report["ok"] and report["targets"] == ["gfx950", "sm_100"]
    assert report["result"] == {"gfx950": "k.gfx950.bin", "sm_100": "k.sm_100.bin"}
    assert (project / "r" / "compile-entry" / "k.sm_100.bin").read_text() == "sm_100"


def test_a_failing_entry_point_fails_the_step_and_says_why(project, capsys):
    rc, report = _compile(project, "mykernels_for_ci:broken")
    assert rc == 1 and not report["ok"]
    assert report["error"] == "RuntimeError: no backend for gfx950"
    assert "mykernels_for_ci:broken failed" in capsys.readouterr().err
    rc, report = _compile(project, "mykernels_for_ci:missing")
    assert rc == 1 and "has no function 'missing'" in report["error"]
