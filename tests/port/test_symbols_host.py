"""Host ``cudaMemcpyToSymbol`` / ``cudaMemcpyFromSymbol`` in launchers become
``mod.symbols.copy_to`` / ``copy_from`` (tests/port/cuda/symbols_host.cu); the launcher
module runs against the kernels on the CPU SYCL device, outputs poisoned, fp64 reference."""

import pytest
import torch

from xvendor.port import parse, pylaunch
from xvendor.ops._common import ArgumentError

from .conftest import CUDA

SRC = CUDA / "symbols_host.cu"


@pytest.mark.l0
def test_symbol_copies_are_translated():
    text = pylaunch.launchers(parse.parse_file(SRC))
    assert "mod.symbols.copy_to('c_coef', h_coef, 4 * 4, 0)" in text
    assert "mod.symbols.copy_to('c_coef', h_c3, 4, 3 * 4)" in text
    assert "mod.symbols.copy_from(h_hits, 'd_hits', 4, 0)" in text
    assert "not translated" not in text


@pytest.mark.l1
@pytest.mark.parametrize("n, block", [(1, 32), (1000, 128), (333, 256)])
def test_launchers_write_and_read_symbols(cuda_module, n, block):
    mod = cuda_module("symbols_host")
    ns = {}
    exec(pylaunch.launchers(mod.translation.unit), ns)  # noqa: S102 (the generated launchers)
    coef = torch.tensor([0.5, -1.0, 0.25, 0.125])
    ns["set_coef"](mod, torch.zeros(4))
    ns["set_linear_terms"](mod, coef[:2].clone())
    ns["set_cubic"](mod, coef[3:].clone())
    assert mod.symbols["c_coef"].view(torch.float32).tolist() == [0.5, -1.0, 0.0, 0.125]
    ns["set_coef"](mod, coef)
    x, y = torch.randn(n), torch.full((n,), float("nan"))
    hits = torch.full((1,), -7, dtype=torch.int32)
    ns["poly_eval"](mod, x, y, n, torch.zeros(1, dtype=torch.int32), hits, block)
    xd = x.double()
    want = 0.5 - xd + 0.25 * xd ** 2 + 0.125 * xd ** 3
    torch.testing.assert_close(y.double(), want, atol=1e-5, rtol=1e-5)
    assert hits.item() == int((x > 0).sum())


@pytest.mark.l1
def test_symbol_copy_bounds_are_checked(cuda_module):
    mod = cuda_module("symbols_host")
    with pytest.raises(ArgumentError, match="count"):
        mod.symbols.copy_to("c_coef", torch.zeros(8), 32, 4)
    with pytest.raises(ArgumentError, match="src"):
        mod.symbols.copy_to("c_coef", torch.zeros(2), 16)
