"""tests/port/cuda/cucomplex.cu: cuComplex.h's functions and cuFFT's complex typedefs in
device code (the compat header; before: 'unknown type name cufftComplex'). Against complex128
torch, outputs poisoned with NaN."""

import pytest
import torch

from .conftest import CUDA  # noqa: F401


@pytest.mark.l1
def test_complex_ops(cuda_module):
    m = cuda_module("cucomplex")
    n = 2000
    a, b = torch.randn(n, 2), torch.randn(n, 2)
    b[:7] *= 1e-20  # tiny divisors: the scaled division keeps them finite
    b[7:14] *= 1e20
    mul, div = torch.full((n, 2), float("nan")), torch.full((n, 2), float("nan"))
    absv = torch.full((n,), float("nan"))
    dmul = torch.full((n, 2), float("nan"), dtype=torch.float64)
    m.complex_ops[(n + 127) // 128, 128](a, b, mul, div, absv, dmul, n)
    ac = torch.view_as_complex(a.double().contiguous())
    bc = torch.view_as_complex(b.double().contiguous())
    torch.testing.assert_close(torch.view_as_complex(mul.double()), ac.conj() * (bc + 1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.view_as_complex(div.double()), ac / bc, rtol=1e-5, atol=1e-30)
    torch.testing.assert_close(absv.double(), (ac - bc).abs(), rtol=1e-6, atol=1e-30)
    torch.testing.assert_close(torch.view_as_complex(dmul), ac * bc, rtol=1e-12, atol=1e-12)
