"""tests/port/cuda/macro_launch.cu: a launch written inside a function-like macro
(``#define LAUNCH(T, W) k<T, W><<<...>>>(...)``, in the host function or at file scope,
the kernel possibly a macro parameter) instantiates the kernel once per use of the macro
(``LAUNCH(float, double)``); before, such kernels had no instantiation (ggml's allreduce)."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_macro_uses_give_instantiations():
    t = build.translate_file(CUDA / "macro_launch.cu")
    assert sorted(i.args for i in t.report("widen_add").instantiations) == [["float", "double"], ["int", "float"]]
    assert sorted(i.args for i in t.report("times_k").instantiations) == [["2"], ["3"]]


@pytest.mark.l1
@pytest.mark.parametrize("n", [50, 300])
def test_macro_launched_kernels_run(cuda_module, n):
    m = cuda_module("macro_launch")
    x = torch.randn(n, dtype=torch.float64).float()
    y = torch.full((n,), float("nan"), dtype=torch.float64)
    m["widen_add<float, double>"][(n + 63) // 64, 64](x, y, n)
    torch.testing.assert_close(y, x.double() + 1, rtol=0, atol=0)
    xi = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    yf = torch.full((n,), float("nan"))
    m["widen_add<int, float>"][(n + 63) // 64, 64](xi, yf, n)
    torch.testing.assert_close(yf.double(), xi.double() + 1, rtol=0, atol=0)
    for k in (2, 3):
        z = x.clone()
        m[f"times_k<{k}>"][(n + 63) // 64, 64](z, n)
        torch.testing.assert_close(z.double(), x.double() * k, rtol=2 ** -24, atol=0)  # one rounding
