"""tests/port/cuda/kernel_prototype.cu: a kernel's prototype at file scope (``static
__global__ void k(Complex *, const Complex *, int, float);``) is dropped; it was kept when its
parameters said ``const`` and clashed with the wrapper ('the first occurrence of SYCL kernel
free function should be declared with ...', 'different language linkage')."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_prototypes_dropped():
    src = build.translate_file(CUDA / "kernel_prototype.cu").source
    assert "void scale_complex(Complex *, const Complex *, int, float);" not in src


@pytest.mark.l1
def test_both_kernels_run(cuda_module):
    m = cuda_module("kernel_prototype")
    n = 200
    b = torch.randn(n, 2)
    a = torch.full((n, 2), float("nan"))
    m.scale_complex[(n + 63) // 64, 64](a, b, n, 0.5)
    torch.testing.assert_close(a, b * 0.5, rtol=0, atol=0)
    x, y = torch.randn(n), torch.full((n,), float("nan"))
    m.copy_floats[(n + 63) // 64, 64](x, n, y)
    assert torch.equal(x, y)
