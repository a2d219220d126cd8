"""tests/port/cuda/void_params.cu: a kernel declared ``k(void)`` (C's empty parameter list)
has no parameters; it was read as one unnamed ``void`` parameter, and the wrapper
dereferenced a ``const void *`` ('indirection not permitted on operand of type const void *')."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_void_parameter_list_is_empty():
    t = build.translate_file(CUDA / "void_params.cu")
    assert [t.report(k).status for k in ("fill_sines", "scale_out")] == ["ok", "ok"]
    assert all(not f.params for f in t.unit.functions if f.kind == "kernel")
    assert "__xv_arg0" not in t.source


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64, 256])
def test_void_kernels_run(cuda_module, block):
    m = cuda_module("void_params")
    n = 256
    m.symbols["g_out"] = torch.full((n,), float("nan"))  # poisoned: every element must be written
    m.fill_sines[(n + block - 1) // block, block]()
    m.scale_out[(n + block - 1) // block, block]()
    i = torch.arange(n, dtype=torch.float64)
    ref = torch.sin(0.01 * i) * i * 0.5
    got = m.symbols["g_out"].view(torch.float32).double()
    torch.testing.assert_close(got, ref, rtol=2e-6, atol=1e-6)
