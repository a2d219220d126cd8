"""Numerics of the triton backend through the dispatch layer, in the Triton interpreter.

All cases run in ONE subprocess started with TRITON_INTERPRET=1 (``interpreter_cases.py``):
the interpreter is chosen when the kernels are imported, and setting it in this process
would leak into every other test. Each case is compared with an fp64 reference; outputs
are NaN-poisoned before the kernel writes them. bf16: see NOTE [bf16 in the interpreter]
in ``interpreter_cases.py`` (tiles are upcast to fp32 before tl.dot under the interpreter).
The served-config cases call the kernel with ``config=`` directly, through dispatch with a
tuned-winner lookup, and through the tunable's ``run``: the config handed over must be
the one launched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import importlib.util

import pytest

from xvendor.triton import configs

pytestmark = pytest.mark.l1

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("xvendor_interpreter_cases",
                                               HERE / "interpreter_cases.py")
cases = importlib.util.module_from_spec(_spec)  # pytest runs with --import-mode=importlib
_spec.loader.exec_module(cases)
ROOT = HERE.parents[1]
GEMM = [c[0] for c in cases.gemm_cases()]
GROUPED = [c[0] for c in cases.grouped_cases()]


@pytest.fixture(scope="module")
def run():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("XVENDOR_BACKEND", None)
    proc = subprocess.run([sys.executable, str(HERE / "interpreter_cases.py")], env=env,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(rec):
    assert rec["backend"] == "triton"
    assert rec["launches"] == 1, "the triton kernel did not run (or ran twice)"
    assert rec["nans"] == 0, "some output elements were never written (NaN poison left)"
    assert rec["worst_err_over_tol"] <= 1.0, rec
    assert rec.get("tail_max_abs", 0.0) == 0.0, "rows/cols past offs[-1] must be zeros"


@pytest.mark.parametrize("name", GEMM)
def test_gemm(run, name):
    _check(run["results"][name])


@pytest.mark.parametrize("name", GROUPED)
def test_grouped_mm(run, name):
    _check(run["results"][name])


@pytest.mark.parametrize("name", [c[0] for c in cases.config_cases()])
def test_served_config_is_the_one_launched(run, name):
    _, op, how, args = next(c for c in cases.config_cases() if c[0] == name)
    rec = run["served"][name]
    assert rec["launches"] == 1, rec
    seen = rec["seen"][0]
    assert seen["config"] == cases.SERVED, f"{how}: the kernel ran {seen['config']}"
    if op == "gemm":  # one program per SERVED tile: the interpreter's 32x32 would differ
        (m, _), n = args[0].shape, args[1].shape[1]
        bm, bn = cases.SERVED["block_m"], cases.SERVED["block_n"]
        assert seen["grid"] == [-(-m // bm) * -(-n // bn)], seen
        im, in_ = configs.INTERPRETER.block_m, configs.INTERPRETER.block_n
        assert seen["grid"] != [-(-m // im) * -(-n // in_)]
    assert rec["nans"] == 0, "some output elements were never written (NaN poison left)"
    assert rec["rel_error"] <= rec["tolerance"], rec


def test_served_config_is_a_real_non_default_candidate():
    served = configs.Config(**cases.SERVED)
    assert served in configs.SPACES["gfx950"]["gemm"]
    assert served not in (configs.INTERPRETER, configs.DEFAULTS["gfx950"]["gemm"])
    assert {c[2] for c in cases.config_cases()} == {"kernel", "dispatch", "tunable"}


def test_cases_cover_every_layout_and_dtype():
    layouts = {n.split("_")[0] for n in GROUPED}
    assert layouts == {"g2x3", "g3x2", "g2x2", "g3x3"}
    for dt in ("float32", "float16", "bfloat16"):
        assert all(f"{lay}_{dt}" in GROUPED for lay in layouts)


def test_bf16_workaround_still_needed(run):
    # If upstream fixes triton#11584, drop UPCAST (NOTE [interpreter bf16] in backend.py).
    assert run["bf16_dot_is_broken"], ("the interpreter's bf16 tl.dot is correct now: "
                                       "remove the UPCAST workaround")
