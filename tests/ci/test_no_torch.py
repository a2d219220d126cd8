"""The matrix job of a CI has no torch: `xvendor ci matrix` runs in a fresh venv that has
only the standard library, and nothing on the way imports torch. Also: `import xvendor`
registers the ops and keeps its public names where torch is installed."""

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.l0
ROOT = Path(__file__).parents[2]
GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A venv of the base interpreter, without pip or site packages: no torch, no rich."""
    where = tmp_path_factory.mktemp("bare-venv")
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(where)
    python = where / "bin" / "python"
    proc = _run(python, "-c", "import torch")
    assert proc.returncode != 0 and "No module named 'torch'" in proc.stderr, \
        "the bare venv must not see torch, or this test proves nothing"
    return python


def _run(python, *args, cwd=ROOT):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(ROOT), PYTHONNOUSERSITE="1")
    return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("command", [["-m", "xvendor.cli", "ci"], ["-m", "xvendor.ci"]])
def test_matrix_command_runs_without_torch(bare_python, command):
    for fmt in ("github", "gitlab", "json"):
        proc = _run(bare_python, *command, "matrix", "--format", fmt,
                    "--file", str(GOLDEN / "matrix.toml"))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == (GOLDEN / f"matrix.{fmt}.txt").read_text()
    proc = _run(bare_python, *command, "matrix", "--changed", "sycl_kernels/rms_norm.cpp",
                "--file", str(GOLDEN / "matrix.toml"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads((GOLDEN / "changed-sycl.json.txt").read_text())
    proc = _run(bare_python, *command, "matrix", "--file", str(ROOT / "ci" / "nope.toml"))
    assert proc.returncode == 2 and "no matrix file at" in proc.stderr


def test_versions_without_torch_says_so(bare_python):
    proc = _run(bare_python, "-m", "xvendor.ci", "versions")
    assert proc.returncode == 0, proc.stderr
    assert "not importable (ModuleNotFoundError)" in proc.stdout
    proc = _run(bare_python, "-m", "xvendor.ci", "versions", "--cell",
                "torch215-cxx11-cpu-x86_64-linux-py311")
    assert proc.returncode == 2
    assert "torch: the cell wants torch==2.15.*, build +cpu (runtime cpu), installed is " \
           "not importable" in proc.stderr


CHECK = """
import sys
{imports}
heavy = sorted(m for m in ("torch", "rich", "numpy") if m in sys.modules)
assert not heavy, heavy
"""


def test_ci_modules_import_no_torch(bare_python):
    imports = ("import xvendor, xvendor.ci.matrix, xvendor.ci.run, xvendor.ci.cli, xvendor.cli\n"
               "import xvendor.tuning.compile_cli, xvendor.ci.report_merge, xvendor.ci.junit\n"
               "import xvendor.ci.compile_cell, xvendor.ci.provenance")
    proc = _run(bare_python, "-c", CHECK.format(imports=imports))
    assert proc.returncode == 0, proc.stderr
    proc = _run(bare_python, "-c", "import xvendor; xvendor.gemm")
    assert proc.returncode != 0 and "xvendor.gemm needs torch" in proc.stderr


def test_with_torch_import_xvendor_registers_the_ops():
    code = ("import torch, xvendor\n"
            "assert hasattr(torch.ops.xvendor, 'gemm') and callable(xvendor.explain)\n"
            "assert set(xvendor.__all__) <= set(dir(xvendor))")
    proc = _run(sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr


def test_package_keeps_its_public_names():
    pytest.importorskip("torch")
    code = """
import sys, xvendor
assert set(xvendor.__all__) <= set(dir(xvendor))
from xvendor.explain import dispatch_table  # the submodule, before the public function
assert callable(xvendor.explain) and xvendor.explain.__module__ == "xvendor.explain"
from xvendor import gemm, explain, devices, use_backend
assert explain is xvendor.explain and devices.__name__ == "xvendor.devices"
ns = {}
exec("from xvendor import *", ns)
assert set(xvendor.__all__) <= set(ns), set(xvendor.__all__) - set(ns)
try:
    xvendor.no_such_name
except AttributeError as e:
    assert "no attribute 'no_such_name'" in str(e)
else:
    raise AssertionError("no AttributeError")
"""
    proc = _run(sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
