"""tests/port/cuda/lambda_tags.cu: a kernel template launched inside a generic lambda whose
``auto`` parameter is a tag (``go(std::integral_constant<int, 1>{})``, ``std::true_type{}``)
takes its template arguments from the tags the lambda is called with (NOTE [lambda tags]),
directly or through a host template (``constexpr bool c = decltype(tag)::value;
run<c>(...)``). Before, neither kernel had an instantiation."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_tags_give_instantiations():
    t = build.translate_file(CUDA / "lambda_tags.cu")
    sum_axis, norm_rows = t.report("sum_axis"), t.report("norm_rows")
    assert sorted(i.args for i in sum_axis.instantiations) == [["float", "0"], ["float", "1"]]
    assert sorted(i.args for i in norm_rows.instantiations) == [["false"], ["true"]]


@pytest.mark.l1
@pytest.mark.parametrize("n0,n1", [(5, 130), (77, 3)])
def test_tagged_kernels_run(cuda_module, n0, n1):
    m = cuda_module("lambda_tags")
    x = torch.randn(n0, n1, dtype=torch.float64).float()
    xd = x.double()
    for axis, n_out, ref in ((0, n1, xd.sum(0)), (1, n0, xd.sum(1))):
        y = torch.full((n_out,), float("nan"))
        m[f"sum_axis<float, {axis}>"][(n_out + 63) // 64, 64](x, y, n0, n1)
        torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)
    for sq, ref in (("true", (xd * xd).sum(1)), ("false", xd.abs().sum(1))):
        y = torch.full((n0,), float("nan"))
        m[f"norm_rows<{sq}>"][(n0 + 31) // 32, 32](x, y, n0, n1)
        torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)
