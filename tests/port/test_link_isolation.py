"""A link failure of the JIT (an error naming no source line) costs the kernels that fail
alone, not the whole unit (NOTE [link failures isolated] in xvendor/port/build.py):
tests/port/cuda/link_isolation.cu calls a device function of another unit from one kernel;
before, every kernel of the file was ``compile_error``."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_isolate_bisects_to_the_failing_kernels():
    bad = {"c", "f"}
    tried = []

    def attempt(subset):
        tried.append(tuple(subset))
        hit = bad & set(subset)
        return f"Symbols not found: {sorted(hit)}" if hit else None
    out = build._isolate(list("abcdefgh"), "all", attempt)
    assert set(out) == bad
    assert out["c"] == "Symbols not found: ['c']"
    assert len(tried) < 12  # bisection, not one build per kernel and pair
    # kernels that fail only together are blamed as a group
    out = build._isolate(["x", "y"], "both", lambda subset: None)
    assert out == {"x": "both", "y": "both"}


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128])
def test_link_failure_costs_one_kernel(cuda_module, block):
    m = cuda_module("link_isolation")
    rep = m.reports["scale_elsewhere"]
    assert rep.status == "compile_error" and "scale_from_other_unit" in rep.reason
    n = 300
    x = torch.randn(n)
    for name, ref in (("add_one", x + 1), ("twice", 2 * x), ("negate", -x)):
        y = torch.full((n,), float("nan"))
        m[name][(n + block - 1) // block, block](x, y, n)
        torch.testing.assert_close(y, ref, rtol=0, atol=0)
