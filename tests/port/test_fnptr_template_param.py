"""tests/port/cuda/fnptr_template_param.cu: a function-pointer template parameter whose
signature names another template parameter (``void (*op)(const float *, out_t *)``) is
named ``op``; it was read as ``out_t`` (the last word), so the host template never bound
and the kernel had no instantiation (ggml's set_rows_cuda_quant / k_set_rows_quant)."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_function_pointer_template_parameter_named():
    t = build.translate_file(CUDA / "fnptr_template_param.cu")
    rep = t.report("apply_pairs")
    assert rep.status == "ok", rep.reason
    assert sorted(i.args for i in rep.instantiations) == [["float", "2", "sum_op"], ["pair_out", "2", "split_op"]]


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64])
def test_apply_pairs_runs(cuda_module, block):
    m = cuda_module("fnptr_template_param")
    n = 150
    x = torch.randn(2 * n)
    y = torch.full((n,), float("nan"))
    m["apply_pairs<float, 2, sum_op>"][(n + block - 1) // block, block](x, y, n)
    torch.testing.assert_close(y, x[0::2] + x[1::2], rtol=0, atol=0)
    yp = torch.full((2 * n,), float("nan"))
    m["apply_pairs<pair_out, 2, split_op>"][(n + block - 1) // block, block](x, yp, n)
    pairs = x.view(n, 2)
    torch.testing.assert_close(yp.view(n, 2), torch.stack([pairs.min(1).values, pairs.max(1).values], 1),
                               rtol=0, atol=0)
