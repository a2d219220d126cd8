"""`xvendor ci run`: a real run of the example consumer project, the JUnit parsing, the
reports, and the no-test failure."""

import subprocess
import sys
from pathlib import Path

import pytest

from xvendor.ci import matrix as ci_matrix
from xvendor.ci import run as ci_run

pytestmark = pytest.mark.l1  # runs pytest in a subprocess on a real project
ROOT = Path(__file__).parents[2]
CONSUMER = ROOT / "examples" / "ci-consumer"


def _ci_run(cwd, *args):
    return subprocess.run([sys.executable, "-m", "xvendor.cli", "ci", "run", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def test_example_consumer_passes_with_the_plugin_and_leaves_reports(tmp_path):
    proc = _ci_run(CONSUMER, "--tier", "l0,l1", "--report", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed, 4 skipped, 1 deselected" in proc.stdout
    assert proc.stdout.rstrip().endswith("xvendor: 3 passed, 0 failed, 4 skipped")
    results = ci_run.parse_junit(tmp_path / "junit.xml")
    assert (results["l0"].passed, results["l0"].failed, results["l0"].skipped) == (2, 0, 4)
    assert (results["l1"].passed, results["l1"].skipped) == (1, 0)
    md = (tmp_path / "report.md").read_text()
    assert "| torch215-cxx11-cpu-x86_64-linux-py311 | 2 passed, 0 failed, 4 skipped |" in md
    assert "not run here (runner linux-mi355x)" in md
    assert "needs a device of arch gfx950; present: no accelerator" in md
    html = (tmp_path / "report.html").read_text()
    assert html.startswith("<!doctype html>") and "needs a ROCm build of torch" in html


def test_a_run_told_its_cell_checks_it_and_runs_the_cells_tiers(tmp_path, monkeypatch, capsys):
    matrix = tmp_path / "matrix.toml"  # the consumer's cpu cell, on this Python
    matrix.write_text((CONSUMER / "ci" / "matrix.toml").read_text().replace(
        'python = "3.11"', f'python = "{sys.version_info[0]}.{sys.version_info[1]}"'))
    cell = ci_matrix.load(matrix).cells[0]
    assert cell.vendor == "cpu" and cell.tiers == ("l0", "l1")
    # This venv's torch may be any build; the cell says cpu.
    monkeypatch.setattr(ci_run, "torch_version", lambda: "2.15.0+cpu")
    monkeypatch.chdir(CONSUMER)
    rc = ci_run.run(None, str(tmp_path / "r"), matrix_file=str(matrix), cell_name=cell.name)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"xvendor ci run: cell {cell.name}" in out and "--xv-tier l0,l1" in out
    md = (tmp_path / "r" / "report.md").read_text()
    assert f"Cell: {cell.name}; tiers run: l0, l1" in md
    assert "## Installed vs the cell" in md and "| torch | 2.15.0+cpu | torch==2.15.*" in md


def test_a_failing_test_fails_the_run(tmp_path):
    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True)
    (proj / "tests" / "test_x.py").write_text(
        "import pytest\n@pytest.mark.l0\ndef test_ok(): pass\n@pytest.mark.l0\ndef test_bad(): assert 0\n")
    proc = _ci_run(proj, "--tier", "l0", "--report", str(tmp_path / "r"))
    assert proc.returncode == 1
    assert "1 passed, 0 failed" not in (tmp_path / "r" / "report.md").read_text()
    assert ci_run.parse_junit(tmp_path / "r" / "junit.xml")["l0"].failed == 1


def test_no_test_is_a_failure(tmp_path):
    proj = tmp_path / "empty"
    (proj / "tests").mkdir(parents=True)
    proc = _ci_run(proj, "--tier", "l0", "--report", str(tmp_path / "r"))
    assert proc.returncode == 5 and "no test ran" in proc.stderr


def test_default_tiers_follow_the_hardware():
    caps = ci_run.Capabilities(["cpu"], ["cpu"], {}, "3.11")
    assert ci_run.default_tiers(caps) == ["l0", "l1"]
    caps = ci_run.Capabilities(["cpu", "amd"], ["cpu", "gfx950"], {}, "3.11")
    assert ci_run.default_tiers(caps) == ["l0", "l1", "l2"]
