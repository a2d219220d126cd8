"""tests/port/cuda/macro_declarations.cu: device types and functions declared by a
function-like macro used at file scope (``DECLARE(Sum, a + b)`` expanding to
``template <class T> struct Combine##NAME##Op {...}``) are reached by the names their
expansion declares (NOTE [declarations through a macro]). Before, the closure saw only a
call declaring nothing and dropped it: 'use of undeclared identifier'; and a use with no ``;`` whose macro's braces
come from another macro swallowed the kernel after it (never reported)."""

import pytest
import torch

from xvendor.port import build, closure, parse

from .conftest import CUDA


@pytest.mark.l0
def test_expansion_declares_the_names():
    u = parse.parse_file(CUDA / "macro_declarations.cu")
    declared = set()
    for it in closure.items(u):
        declared |= closure._declared(u, it)
    assert {"CombineSumOp", "combineSum", "CombineScaledOp", "combineScaled"} <= declared
    t = build.translate_file(CUDA / "macro_declarations.cu")
    # a use with no `;` right before the kernel (its macro's braces come through another
    # macro) ends at its `)`: the kernel after it is still read
    assert t.report("combine_all").status == "ok"
    src = t.source
    for use in ("DECLARE_COMBINE(Sum, a + b)", "DECLARE_COMBINE(Scaled, OP_SCALE * a - b)",
                "DECLARE_BOTH(Prod)"):
        assert use in src


@pytest.mark.l1
@pytest.mark.parametrize("n,block", [(1000, 128), (37, 32)])
def test_macro_declared_code_runs(cuda_module, n, block):
    m = cuda_module("macro_declarations")
    x, y = torch.rand(n) + 0.5, torch.rand(n) - 1.5
    out = torch.full((n,), float("nan"))
    m.combine_all[(n + block - 1) // block, block](x, y, out, n)
    xd, yd = x.double(), y.double()
    ref = (xd + yd) + (3 * xd - yd) + xd * yd
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)
