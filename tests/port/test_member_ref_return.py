"""tests/port/cuda/member_ref_return.cu: a member function of a class template defined
outside the class with a reference return type (``T const &box<T>::lower() const``) is
device code the kernels reach; its declarator (a reference declarator, which names its
inner declarator by position) hid its name, so it was dropped and the JIT's link failed
('Symbols not found: box<double>::lower() const', cuda-samples' interval)."""

import pytest
import torch

from xvendor.port import build, parse

from .conftest import CUDA


@pytest.mark.l0
def test_reference_returning_member_is_kept():
    assert "box<T>::lower" in {f.name for f in parse.parse_file(CUDA / "member_ref_return.cu").functions}
    assert "T const &box<T>::lower() const { return lo; }" in build.translate_file(CUDA / "member_ref_return.cu").source


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64])
def test_member_functions_run(cuda_module, block):
    m = cuda_module("member_ref_return")
    n = 99
    a = torch.randn(n, dtype=torch.float64)
    b = a + torch.rand(n, dtype=torch.float64)
    out = torch.full((n,), float("nan"), dtype=torch.float64)
    m["widths<double>"][(n + block - 1) // block, block](a, b, out, n)
    torch.testing.assert_close(out, (b - a) + a, rtol=0, atol=0)
