"""tests/port/cuda/cast_dispatch.cu: a host template's callers pass cast arguments
(``(const double *) src``, ``static_cast<float *>(dst)``); the casts bind its template
parameters, so the kernel it launches is instantiated for both types and runs."""

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
    for expr in ("(a)+b", "(float)a + b", "x", "(n + 1)", "sizeof(x)", "(const float *) a + 4"):
        assert instantiate.cast_type(expr) is None, expr


@pytest.mark.l0
def test_casts_instantiate_the_kernel():
    rep = build.translate_file(SRC).report("clamp_below")
    assert rep.status == "ok"
    assert sorted(i.args for i in rep.instantiations) == [["double"], ["float"]]


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
