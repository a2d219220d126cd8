"""Under ``torch.compile(mode="max-autotune")``, a call whose decision is a kernel of ours
keeps the ``xvendor::`` op and Inductor benchmarks our backends against torch's own op and
compiles the winner (NOTE [max-autotune choices] in ``xvendor.dispatch.autotune``). On the
CPU: the SYCL kernels on the OpenCL CPU device and the Triton interpreter, made eligible by
a plugin record (neither runs on the CPU automatically). An explicit request is never
overridden."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.l1, pytest.mark.timeout(420)]
CASE = Path(__file__).with_name("autotune_case.py")


@pytest.fixture(scope="module")
def result() -> dict:
    """Both cases in one process (each start imports torch, Inductor and triton)."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, str(CASE)], env=env, capture_output=True, text=True,
                          timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.heavy
def test_max_autotune_benchmarks_every_backend_and_runs_the_winner(result):
    assert result["decision"] == "sycl"
    r = result["auto"]
    assert len(r["timings"]) == 1, r["timings"]  # one autotuned call: the grouped_mm
    found = r["timings"][0]
    names = " ".join(found)
    # the decision (Inductor's fallback: the custom op as decided), the other eligible
    # backend, and torch's own kernel inlined as a decomposition
    assert "fallback" in names and "backend_triton" in names and "torch_grouped_mm" in names
    assert all(t > 0 and t != float("inf") for t in found.values()), found
    winner = min(found, key=found.get)
    if "torch_grouped_mm" in winner:  # inlined: torch's op in the code, not ours
        assert r["calls_torch"] and not r["calls_xvendor"]
    else:  # an extern call of the xvendor op (the decided backend or backend="triton")
        assert r["calls_xvendor"]
    assert r["err"] < 1e-5


def test_an_explicit_request_is_not_autotuned(result):
    r = result["explicit"]
    assert r["timings"] == []
    assert r["calls_xvendor"] and not r["calls_torch"]
    assert r["err"] < 1e-5


@pytest.mark.parametrize("op", ["gemm", "grouped_mm", "rms_norm", "scaled_mm",
                                "scaled_grouped_mm"])
def test_argument_positions_come_from_the_registered_op(op):
    # the lowering reads a traced call's arguments by schema position: the names are the
    # registered custom op's, in the public function's order, and each resolves to its slot
    import inspect

    import xvendor
    from xvendor.dispatch import autotune

    names = autotune._schema(op)
    assert list(names) == list(inspect.signature(getattr(xvendor, op)).parameters)
    args = tuple(f"value of {n}" for n in names[:-2])
    for i, n in enumerate(names):
        want = args[i] if i < len(args) else None
        assert autotune._value(op, n, args, {}) == want
    assert autotune._value(op, names[-1], (), {names[-1]: "kw"}) == "kw"
