"""`xvendor ci run`: a real run of the example consumer project, the JUnit parsing, the
reports, and the no-test failure."""

import subprocess
import sys
from pathlib import Path

import pytest

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
