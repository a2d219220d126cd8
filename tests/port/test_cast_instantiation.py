"""tests/port/cuda/cast_dispatch.cu: a host template's callers pass cast arguments
(``(const double *) src``, ``static_cast<float *>(dst)``); the casts bind its template
parameters, so the kernel it launches is instantiated for both types and runs. A launch
writing only the leading template arguments (``k<negate><<<...>>>(x, dst)``) gets the rest
deduced from its arguments."""

import pytest
import torch

from xvendor.port import build, instantiate

from .conftest import CUDA

SRC = CUDA / "cast_dispatch.cu"


@pytest.mark.l0
def test_cast_type():
    assert instantiate.cast_type("(const half *)src0_d") == "half"
    assert instantiate.cast_type("static_cast<const float*>(x)") == "float"
    assert instantiate.cast_type("(unsigned int) n") == "unsigned int"
    assert instantiate.cast_type("(const float *)src0->data") == "float"  # -> is no operator
    for expr in ("(a)+b", "(float)a + b", "x", "(n + 1)", "sizeof(x)", "(const float *) a + 4"):
        assert instantiate.cast_type(expr) is None, expr


@pytest.mark.l0
def test_casts_instantiate_the_kernel():
    rep = build.translate_file(SRC).report("clamp_below")
    assert rep.status == "ok"
    assert sorted(i.args for i in rep.instantiations) == [["double"], ["float"]]


@pytest.mark.l0
def test_leading_launch_arguments_then_deduced():
    rep = build.translate_file(SRC).report("scale_to")
    assert [i.args for i in rep.instantiations] == [["true", "float", "double"]]


@pytest.mark.l1
@pytest.mark.parametrize("dtype,spec", [(torch.float32, "clamp_below<float>"),
                                        (torch.float64, "clamp_below<double>")])
def test_cast_instantiations_run(cuda_module, dtype, spec):
    m = cuda_module("cast_dispatch")
    k = 1000
    x = torch.randn(k, dtype=dtype, generator=torch.Generator().manual_seed(7))
    y = torch.full((k,), float("nan"), dtype=dtype)
    m[spec][(k + 63) // 64, 64](x, y, -0.25, k)
    torch.testing.assert_close(y.double(), x.double().clamp(min=-0.25))


@pytest.mark.l1
def test_partly_deduced_instantiation_runs(cuda_module):
    m = cuda_module("cast_dispatch")
    k = 300
    x = torch.randn(k, generator=torch.Generator().manual_seed(3))
    y = torch.full((k,), float("nan"), dtype=torch.float64)
    m["scale_to<true, float, double>"][(k + 63) // 64, 64](x, y, 1.5, k)
    torch.testing.assert_close(y, -1.5 * x.double())
