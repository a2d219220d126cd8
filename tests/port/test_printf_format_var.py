"""tests/port/cuda/printf_format_var.cu: ``const char *warning = "..."; printf(warning);``
compiles: the format is replaced by the literal the local constant holds (SYCL's printf
takes its format from the constant address space; before: 'array initializer must be an
initializer list or string literal')."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_format_variable_replaced_by_its_literal():
    src = build.translate_file(CUDA / "printf_format_var.cu").source
    assert "printf(warning)" not in src
    assert 'printf("clamped an element "\n        "above the limit\\n")' in src


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128])
def test_kernel_with_format_variable_runs(cuda_module, block):
    m = cuda_module("printf_format_var")
    n = 300
    x = torch.randn(n, dtype=torch.float64).float()
    x[1] = 5.0  # not element 0: nothing printed, the kernel still computes
    y = torch.full((n,), float("nan"))
    m.clamp_warn[(n + block - 1) // block, block](x, y, 1.5, n)
    torch.testing.assert_close(y.double(), x.double().clamp(max=1.5) * 2, rtol=0, atol=0)
