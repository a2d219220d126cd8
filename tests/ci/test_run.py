"""`xvendor ci run`: a real run of the example consumer project, a consumer project built
in a temporary folder run end to end (pytest's own testpaths, its own toolchain, a tier
that ran nothing, a failing test by name, a dry run), the JUnit suites, and the reports."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from xvendor.ci import matrix as ci_matrix
from xvendor.ci import run as ci_run

pytestmark = pytest.mark.l1  # runs pytest in a subprocess on a real project
ROOT = Path(__file__).parents[2]
CONSUMER = ROOT / "examples" / "ci-consumer"


def _ci_run(cwd, *args):
    env = {k: v for k, v in __import__("os").environ.items() if k != ci_run.CELL_ENV}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "xvendor.cli", "ci", "run", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def test_example_consumer_passes_with_the_plugin_and_leaves_reports(tmp_path):
    proc = _ci_run(CONSUMER, "--tier", "l0,l1", "--report", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed, 4 skipped, 1 deselected" in proc.stdout
    assert proc.stdout.rstrip().endswith("xvendor: 3 passed, 0 failed, 4 skipped")
    results = ci_run.parse_junit(tmp_path / "junit.xml")
    assert (results["l0"].passed, results["l0"].failed, results["l0"].skipped) == (2, 0, 4)
    assert (results["l1"].passed, results["l1"].skipped) == (1, 0)  # the kernel compiled
    summary = json.loads((tmp_path / "summary.json").read_text())
    md = (tmp_path / "report.md").read_text()
    assert "| l0 | 2 passed, 0 failed, 4 skipped |" in md and "**PASSED**" in md
    assert "needs a device of arch gfx950; present: no accelerator" in md
    # Labelled only when this environment passes the cell's check (this venv's torch
    # build need not be the cell's +cpu).
    cpu = ci_matrix.load(CONSUMER / "ci" / "matrix.toml").cells[0]
    labelled = all(r.ok for r in ci_run.check_cell(cpu))
    assert summary["label"] == cpu.name if labelled else \
        summary["label"].startswith("unlabelled (this machine: cpu, Python ")
    for key in ("host", "os", "cpu", "torch", "commit", "started", "duration_s"):
        assert summary["provenance"][key], key
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert suite.get("name") == summary["label"] and props["xv_cell"] == summary["label"]
    assert props["torch"] == summary["provenance"]["torch"]
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
    rc = ci_run.run(None, str(tmp_path / "r"), matrix_file=str(matrix), cell_name=cell.name,
                    pytest_args=["-k", "opcheck or kernel"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"xvendor ci run: cell {cell.name}" in out and "--xv-tier l0,l1" in out
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.startswith(f"# xvendor CI report: {cell.name}\n")
    assert "## Installed vs the cell" in md and "| torch | 2.15.0+cpu | torch==2.15.*" in md


PYPROJECT = """
[tool.pytest.ini_options]
testpaths = ["test"]
xv_toolchains = ["mykernels = no-such-dist-xyz"]
"""
TESTS = '''
import pytest

@pytest.mark.l0
def test_logic():
    assert 1 + 1 == 2

@pytest.mark.l0
def test_broken():
    assert [1, 2] == [1, 3], "the reference disagrees"

@pytest.mark.l1
@pytest.mark.requires_toolchain("mykernels")
def test_needs_my_toolchain():
    pass

@pytest.mark.l0
@pytest.mark.requires_arch("gfx950")
def test_gfx950_logic():
    pass
'''


@pytest.fixture
def consumer(tmp_path):
    """A consumer project with its own layout: tests in test/, a toolchain of its own."""
    proj = tmp_path / "kernels"
    (proj / "test").mkdir(parents=True)
    (proj / "pyproject.toml").write_text(PYPROJECT)
    (proj / "test" / "test_ops.py").write_text(TESTS)
    (proj / "test" / "__init__.py").write_text("")
    return proj


def _run_in(consumer, monkeypatch, capfd, tiers, report, *pytest_args):
    """`xvendor ci run` in this process (one torch import for all runs); pytest itself
    runs in a subprocess as always."""
    monkeypatch.chdir(consumer)
    monkeypatch.delenv(ci_run.CELL_ENV, raising=False)
    rc = ci_run.run(tiers, str(report), pytest_args=list(pytest_args))
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess([], rc, out, err)


@pytest.mark.heavy
def test_a_consumer_project_end_to_end(consumer, tmp_path, monkeypatch, capfd):
    # pytest's own testpaths (test/), not a hard-coded tests/.
    proc = _run_in(consumer, monkeypatch, capfd, ["l0"], tmp_path / "l0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    s = json.loads((tmp_path / "l0" / "summary.json").read_text())
    assert s["results"]["l0"] == {"passed": 1, "failed": 1, "skipped": 1, "skip_reasons": {
        "needs a device of arch gfx950; present: no accelerator": 1}}
    [failure] = s["failures"]
    assert failure["test"] == "test/test_ops.py::test_broken" and failure["tier"] == "l0"
    assert failure["message"].startswith("AssertionError: the reference disagrees")
    md = (tmp_path / "l0" / "report.md").read_text()
    assert "- `test/test_ops.py::test_broken` (l0, failure)" in md
    assert "    > AssertionError: the reference disagrees" in md
    # A tier that selected tests and ran none of them fails, with the skip reasons.
    proc = _run_in(consumer, monkeypatch, capfd, ["l1"], tmp_path / "l1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "tier l1 ran no test (1 skipped): needs toolchain mykernels (not installed)" \
        in proc.stderr
    s = json.loads((tmp_path / "l1" / "summary.json").read_text())
    assert s["not_run"] == [{"tier": "l1", "skipped": 1, "reasons": {
        "needs toolchain mykernels (not installed)": 1}}]
    # A dry run says so, and labels no cell.
    proc = _run_in(consumer, monkeypatch, capfd, ["l0"], tmp_path / "dry",
                   "--xv-arch", "gfx950", "-k", "gfx950")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = json.loads((tmp_path / "dry" / "summary.json").read_text())
    assert s["cell"] is None and s["label"].startswith("unlabelled (this machine: ")
    assert s["dry_run"].startswith("accelerators relabelled as gfx950")
    assert "**Dry run**: accelerators relabelled as gfx950" in \
        (tmp_path / "dry" / "report.md").read_text()


def test_no_test_is_a_failure(tmp_path):
    proj = tmp_path / "empty"
    (proj / "tests").mkdir(parents=True)
    proc = _ci_run(proj, "--tier", "l0", "--report", str(tmp_path / "r"))
    assert proc.returncode == 5 and "no test ran" in proc.stderr
    assert "no test ran: that is a failure" in (tmp_path / "r" / "report.md").read_text()


def test_default_tiers_follow_the_hardware():
    caps = ci_run.Capabilities(["cpu"], ["cpu"], {}, "3.11")
    assert ci_run.default_tiers(caps) == ["l0", "l1"]
    caps = ci_run.Capabilities(["cpu", "amd"], ["cpu", "gfx950"], {}, "3.11")
    assert ci_run.default_tiers(caps) == ["l0", "l1", "l2"]
