"""tests/port/cuda/multi_symbols.cu: a ``__device__`` declaration of several variables
(``__device__ static unsigned int a = 0, b = 0;``) gives one module symbol per name; it was
dropped whole, and kernels using the names failed ('use of undeclared identifier')."""

import pytest
import torch

from xvendor.port import build, symbols

from .conftest import CUDA


@pytest.mark.l0
def test_each_name_is_a_symbol():
    t = build.translate_file(CUDA / "multi_symbols.cu")
    table = symbols.symbols(t.unit)
    assert {k: v[1] for k, v in table.items()} == {
        "n_neg": "unsigned int", "n_pos": "unsigned int", "sum_neg": "float[1]", "sum_pos": "float[1]"}
    assert [k.status for k in t.kernels] == ["ok", "ok"]


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128])
def test_counts_and_sums(cuda_module, block):
    m = cuda_module("multi_symbols")
    n = 1000
    x = torch.randn(n, dtype=torch.float64).float()
    for name in ("n_neg", "n_pos"):
        m.symbols[name] = torch.zeros(1, dtype=torch.int32)
    for name in ("sum_neg", "sum_pos"):
        m.symbols[name] = torch.zeros(1)
    m.split_count[(n + block - 1) // block, block](x, n)
    out = torch.full((2,), -1, dtype=torch.int32)  # poisoned
    m.read_counts[1, 32](out)
    neg = x < 0
    assert out.tolist() == [int(neg.sum()), int((~neg).sum())]
    assert m.symbols["n_neg"].view(torch.int32).item() == int(neg.sum())
    xd = x.double()
    torch.testing.assert_close(m.symbols["sum_neg"].view(torch.float32).double(), xd[neg].sum().reshape(1),
                               rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(m.symbols["sum_pos"].view(torch.float32).double(), xd[~neg].sum().reshape(1),
                               rtol=1e-5, atol=1e-4)
