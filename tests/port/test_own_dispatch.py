"""tests/port/cuda/own_dispatch.cu: a launch inside a dispatch macro the file defines itself
(a run-time switch binding ``static constexpr Combine C = ADD;`` or ``using acc_t = double;``
per case before calling the lambda it is given) takes each value the macro binds, also
through three nested macros, one binding the name its caller gives
(``FLAG_SWITCH(cond, kScale, ...)``) (NOTE [project dispatch macros]). Before, the launch gave no
instantiation ('template kernel with no instantiation found')."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_bound_values_instantiate():
    rep = build.translate_file(CUDA / "own_dispatch.cu").report("combine")
    assert rep.status == "ok"
    got = sorted([tuple(i.args) for i in rep.instantiations] +
                 [tuple(a) for a in rep.deferred])
    want = sorted((("float", a, c, k) for c in ("ADD", "MUL", "MAXIMUM") for a in ("double", "float")
                   for k in ("3", "2")))
    assert got == want


@pytest.mark.l1
@pytest.mark.parametrize("n,block", [(300, 64), (33, 32)])
def test_each_binding_runs(cuda_module, n, block):
    m = cuda_module("own_dispatch")
    x, y = torch.randn(n), torch.randn(n)
    xd, yd = x.double(), y.double()
    refs = {"ADD": xd + yd, "MUL": xd * yd, "MAXIMUM": torch.maximum(xd, yd)}
    for c, ref in refs.items():
        for acc in ("float", "double"):
            for k in (2, 3):
                out = torch.full((n,), float("nan"))
                m[f"combine<float, {acc}, {c}, {k}>"][(n + block - 1) // block, block](x, y, out, n)
                torch.testing.assert_close(out.double(), k * ref, rtol=1e-6, atol=1e-6)
