"""tests/port/cuda/file_alias_launch.cu: ``k<T><<<...>>>`` in ``main``, with ``typedef REAL
T;`` at file scope and ``#define REAL double``, instantiates ``k<double>``; the name was
taken for some host template's own parameter ``T`` (not concrete), and the kernel had no
instantiation (cuda-samples' interval)."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_file_scope_alias_is_resolved():
    rep = build.translate_file(CUDA / "file_alias_launch.cu").report("axpb")
    assert [i.args for i in rep.instantiations] == [["double"]]


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64])
def test_axpb_double(cuda_module, block):
    m = cuda_module("file_alias_launch")
    n = 101
    x = torch.randn(n, dtype=torch.float64)
    y = torch.full((n,), float("nan"), dtype=torch.float64)
    m["axpb<double>"][(n + block - 1) // block, block](x, y, 2.5, -1.0, n)
    torch.testing.assert_close(y, 2.5 * x - 1.0, rtol=1e-15, atol=1e-15)
