"""tests/port/cuda/free_operators.cu: free ``__device__`` operators at file scope are kept
by the closure (NOTE [free operators] in closure.py): ``a * b`` names no function, so they
were dropped and every kernel using them failed ('invalid operands to binary expression')."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_free_operators_reach_the_translation():
    t = build.translate_file(CUDA / "free_operators.cu")
    assert [k.status for k in t.kernels] == ["ok", "ok"]
    for sig in ("operator*(const cplx& a", "operator*(const float3& a", "operator+(const float3& a"):
        assert sig in t.source, sig


@pytest.mark.l1
def test_float3_operators_with_a_double_constant(cuda_module):
    m = cuda_module("free_operators")
    n = 1000
    x = torch.randn(n, 3)
    y = torch.full((n,), float("nan"))
    m.half_plus_norm[(n + 127) // 128, 128](x, y, n)
    w = x.double() * 0.5 + x.double()
    torch.testing.assert_close(y.double(), (w * w).sum(1), rtol=2e-6, atol=1e-6)


@pytest.mark.l1
def test_struct_operator(cuda_module):
    m = cuda_module("free_operators")
    n = 777
    x = torch.randn(n, 2)
    y = torch.full((n, 2), float("nan"))
    m.cplx_square[(n + 63) // 64, 64](x, y, n)
    z = torch.view_as_complex(x.double().contiguous()) ** 2
    torch.testing.assert_close(y.double(), torch.view_as_real(z), rtol=2e-6, atol=1e-6)
