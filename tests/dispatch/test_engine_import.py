"""The dispatch engine's import cost: importing xvendor (and its distributed package, what an
eager training worker imports) must not import ``torch._dynamo`` (~2 s of every process
start on this machine, ~20 s under load, paid again by every restarted worker), and the
engine's stand-in for ``torch.compiler.assume_constant_result`` must mark a function the way
torch's decorator does."""

import subprocess
import sys

import pytest
import torch

from xvendor.dispatch import engine

pytestmark = pytest.mark.l0


def test_importing_xvendor_does_not_import_dynamo():
    code = ("import sys, xvendor, xvendor.distributed, xvendor.nn; "
            "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.strip()
    assert out == "[]", f"imported at start: {out}"


def test_assume_constant_result_marks_as_torch_does():
    def ours():
        return 1

    def theirs():
        return 1

    assert engine.assume_constant_result(ours) is ours
    assert vars(torch.compiler.assume_constant_result(theirs)) == vars(ours)
    assert vars(ours)  # a flag was set


def test_the_floor_decision_is_a_constant_under_compile():
    # traced: the decided floor is read as a constant, so the graph holds torch's op
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    import xvendor
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        return gm.forward

    out = torch.compile(lambda x, y: xvendor.gemm(x, y), backend=backend, fullgraph=True)(a, b)
    torch.testing.assert_close(out, a @ b)
    ops = {str(n.target) for g in graphs for n in g.graph.nodes if n.op == "call_function"}
    assert not any("xvendor" in o for o in ops), ops
