"""`xvendor ci versions --cell` and the check `xvendor ci run` makes first: installed torch
build and toolchains against the cell, hardware tiers against the present arch."""

import argparse
import platform

import pytest

from xvendor.ci import cli as ci_cli
from xvendor.ci import matrix as ci_matrix
from xvendor.ci import run as ci_run

pytestmark = pytest.mark.l0
PY = ".".join(platform.python_version_tuple()[:2])
MATRIX = f"""
[defaults]
torch = "2.15"
python = "{PY}"
machine = "{platform.machine()}"

[[cell]]
vendor = "cpu"
arch = "cpu"
runtime = "cpu"
runner = "r"
tiers = ["l0", "l1"]
toolchains = {{ triton = "3.9", oneapi = "2026.2" }}

[[cell]]
vendor = "amd"
arch = "gfx950"
runtime = "rocm72"
runner = "r"
tiers = ["l0", "l2"]
toolchains = {{ triton = "3.9", flydsl = "0.3.4.1" }}
"""
CPU = f"torch215-cxx11-cpu-{platform.machine()}-linux-py{PY.replace('.', '')}"
GFX950 = f"torch215-cxx11-rocm72-{platform.machine()}-linux-gfx950-py{PY.replace('.', '')}"


@pytest.fixture
def installed(monkeypatch):
    """Pretend installs: distribution -> version, plus "torch" -> torch.__version__."""
    have = {"torch": "2.15.0+cpu", "triton": "3.9.0", "intel-sycl-rt": "2026.2.0",
            "intel-opencl-rt": "2026.2.1", "pytorch-triton-rocm": "3.9.0", "flydsl": "0.3.4.1"}
    monkeypatch.setattr(ci_run, "torch_version", lambda: have["torch"])
    monkeypatch.setattr(ci_run, "dist_version", lambda d: have.get(d))
    return have


@pytest.fixture
def matrix_file(tmp_path):
    path = tmp_path / "matrix.toml"
    path.write_text(MATRIX)
    return path


def test_a_matching_environment_passes(installed, matrix_file):
    cell = ci_matrix.load(matrix_file).cell(CPU)
    rows = ci_run.check_cell(cell)
    assert [r.what for r in rows] == ["python", "machine", "torch", "triton", "intel-sycl-rt",
                                      "intel-opencl-rt"]
    assert all(r.ok for r in rows), rows
    ci_run.require_cell(cell, rows)
    text = ci_run.format_versions(rows)
    assert "intel-sycl-rt==2026.2.* (oneapi)" in text and "MISMATCH" not in text


@pytest.mark.parametrize("change,message", [
    ({"torch": "2.15.0+cu132"}, "torch: the cell wants torch==2.15.*, build +cpu (runtime cpu), "
                                "installed is 2.15.0+cu132"),
    ({"torch": "2.14.1+cpu"}, "installed is 2.14.1+cpu"),
    ({"triton": None}, "triton: the cell wants triton==3.9.*, installed is nothing"),
    ({"intel-opencl-rt": "2025.3.0"}, "intel-opencl-rt: the cell wants intel-opencl-rt==2026.2.* "
                                      "(oneapi), installed is 2025.3.0"),
])
def test_a_mismatch_names_the_cell_and_what_differs(installed, matrix_file, change, message):
    installed.update(change)
    cell = ci_matrix.load(matrix_file).cell(CPU)
    with pytest.raises(ci_run.CellMismatch) as err:
        ci_run.require_cell(cell, ci_run.check_cell(cell))
    assert str(err.value).startswith(f"ci: this environment is not cell {CPU}: ")
    assert message in str(err.value)


def test_rocm_cells_check_the_rocm_triton(installed, matrix_file):
    installed["torch"] = "2.15.0+rocm7.2"
    cell = ci_matrix.load(matrix_file).cell(GFX950)
    rows = ci_run.check_cell(cell)
    assert "pytorch-triton-rocm" in [r.what for r in rows] and all(r.ok for r in rows)


def test_versions_command(installed, matrix_file, capsys):
    assert ci_cli.main(["versions", "--file", str(matrix_file), "--cell", CPU]) == 0
    assert f"cell {CPU}" in capsys.readouterr().out
    installed["torch"] = "2.15.0+cu132"
    assert ci_cli.main(["versions", "--file", str(matrix_file), "--cell", CPU]) == 2
    out, err = capsys.readouterr()
    assert "MISMATCH" in out and "xvendor: ci: this environment is not cell" in err
    assert ci_cli.main(["versions", "--file", str(matrix_file), "--cell", "nope"]) == 2
    assert "no cell named 'nope'" in capsys.readouterr().err


def test_run_stops_before_pytest_when_the_cell_does_not_hold(installed, matrix_file,
                                                              monkeypatch, tmp_path):
    monkeypatch.setattr(ci_run.subprocess, "call", lambda *a, **k: pytest.fail("ran pytest"))
    caps = ci_run.Capabilities(["cpu"], ["cpu"], {}, PY)
    monkeypatch.setattr(ci_run, "detect_capabilities", lambda: caps)
    report = str(tmp_path / "r")
    installed["torch"] = "2.15.0+cu132"
    with pytest.raises(ci_run.CellMismatch, match="torch: the cell wants"):
        ci_run.run(None, report, matrix_file=str(matrix_file), cell_name=CPU)
    # The job's report still says why (the workflow uploads it).
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.startswith(f"# xvendor CI report: {CPU} (cell check failed)")
    assert "**CELL CHECK FAILED** (exit code 2)" in md
    assert "torch: the cell wants torch==2.15.*, build +cpu (runtime cpu), installed is " \
           "2.15.0+cu132" in md and "| torch | 2.15.0+cu132 | torch==2.15.*" in md
    installed["torch"] = "2.15.0+cpu"
    with pytest.raises(ci_run.CellMismatch, match=r"--tier l2 is not among cell .*'s tiers "
                                                   r"\['l0', 'l1'\]"):
        ci_run.run(["l0", "l2"], report, matrix_file=str(matrix_file), cell_name=CPU)
    installed["torch"] = "2.15.0+rocm7.2"
    with pytest.raises(ci_run.CellMismatch, match=f"cell {GFX950} runs hardware tiers on a "
                                                   "gfx950, and this machine has cpu"):
        ci_run.run(None, report, matrix_file=str(matrix_file), cell_name=GFX950)


def test_a_report_names_a_cell_only_when_its_check_passes(installed, matrix_file):
    mx = ci_matrix.load(matrix_file)
    caps = ci_run.Capabilities(["cpu"], ["cpu"], {}, PY)
    assert ci_run.label_cell(mx, caps).name == CPU
    installed["torch"] = "2.15.0+cu132"  # what `ci versions --cell` calls a MISMATCH
    assert ci_run.label_cell(mx, caps) is None


def test_versions_report_on_a_mismatch(installed, matrix_file, tmp_path, capsys):
    installed["triton"] = "3.8.0"
    args = ["versions", "--file", str(matrix_file), "--cell", CPU, "--report", str(tmp_path)]
    assert ci_cli.main(args) == 2
    summary = __import__("json").loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "cell check failed" and summary["rc"] == 2
    assert "triton: the cell wants triton==3.9.*, installed is 3.8.0" in summary["reason"]


def test_run_takes_the_cell_from_the_environment(monkeypatch):
    monkeypatch.setenv(ci_run.CELL_ENV, CPU)
    p = argparse.ArgumentParser()
    ci_cli.add_subcommands(p)
    assert p.parse_args(["run"]).cell == CPU
    monkeypatch.delenv(ci_run.CELL_ENV)
    p = argparse.ArgumentParser()
    ci_cli.add_subcommands(p)
    assert p.parse_args(["run"]).cell is None
