"""tests/port/cuda/host_overloads.cu: the kernel's template parameters are bound from (1)
a local declared right after a statement macro written without its ';' (the parser reads
the macro as the declaration's type: the instantiation was ``widen<LOCAL_SIZES, double>``,
'undeclared identifier') and (2) a host template overloaded by arity, the short form
calling the long one (the short form's call ``scale_rows<int>(ctx, src, dst)`` bound the
long form's ``dst_t`` to ``buffer``, and the recursion guard, by name, stopped the long
form's binding through the short one)."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_instantiations():
    rep = build.translate_file(CUDA / "host_overloads.cu").report("widen")
    assert rep.status == "ok"
    assert sorted(i.args for i in rep.instantiations) == [["float", "double"], ["int", "float"], ["int", "int"]]


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64])
def test_widen_runs(cuda_module, block):
    m = cuda_module("host_overloads")
    n = 200
    x = torch.randn(n)
    y = torch.full((n,), float("nan"), dtype=torch.float64)
    m["widen<float, double>"][(n + block - 1) // block, block](x, y, n)
    torch.testing.assert_close(y, x.double() * 3, rtol=0, atol=0)
    xi = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    yf = torch.full((n,), float("nan"))
    m["widen<int, float>"][(n + block - 1) // block, block](xi, yf, n)
    torch.testing.assert_close(yf, xi.float() * 3, rtol=0, atol=0)
    yi = torch.full((n,), -7, dtype=torch.int32)
    m["widen<int, int>"][(n + block - 1) // block, block](xi, yi, n)
    assert torch.equal(yi, xi * 3)
