"""tests/port/cuda/macro_picker.cu: a kernel template named with its arguments only inside
a function-like macro's body (``#define PICK(k) if (factor == k) return scale_by<k>``,
used as ``PICK(2); PICK(3); ...`` in a host function returning a kernel pointer) gets one
instantiation per use (NOTE [kernels named in a macro]); before, it had none ("template
kernel with no instantiation found")."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_macro_named_instantiations_found():
    rep = build.translate_file(CUDA / "macro_picker.cu").report("scale_by")
    assert rep.status == "ok", rep.reason
    assert sorted(i.args for i in rep.instantiations) == [["2"], ["3"], ["5"]]


@pytest.mark.l1
@pytest.mark.parametrize("k", [2, 5])
def test_macro_named_instantiations_run(cuda_module, k):
    m = cuda_module("macro_picker")
    n = 200
    x = torch.randn(n, generator=torch.Generator().manual_seed(k))
    y = torch.full((n,), float("nan"))
    m[f"scale_by<{k}>"][(n + 63) // 64, 64](x, y, n)
    torch.testing.assert_close(y, (x.double() * k).float(), rtol=0, atol=0)  # one rounding
