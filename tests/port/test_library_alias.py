"""tests/port/cuda/library_alias.cu: CUB named through a project's own namespace alias
(``namespace my_cub = cub;`` in the branch of an ``#if`` that selects hipCUB or CUB, and an
alias of that alias) or through a macro (``#define MY_SUM_OP cub::Sum()``) is refused as a
library call naming the alias or the macro (NOTE [library through an alias or a macro]).
Before, those kernels failed to compile on the alias, and the alias's declaration went into
the SYCL build and failed the file's plain kernel too."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_library_through_alias_and_macro_refused():
    t = build.translate_file(CUDA / "library_alias.cu")
    for name, via in (("block_sum", "'my_cub' = cub"), ("pair_sum", "macro 'MY_SUM_OP'"),
                      ("alias_of_alias", "'my_cub2' = cub")):
        r = t.report(name)
        assert r.status == "unsupported" and r.reason.startswith("library call"), (name, r.reason)
        assert via in r.reason, (name, r.reason)
    assert t.report("twice").status == "ok", t.report("twice").reason
    assert "namespace my_cub" not in t.source


@pytest.mark.l1
def test_plain_kernel_beside_the_alias_runs(cuda_module):
    m = cuda_module("library_alias")
    n = 300
    x = torch.randn(n)
    ref = x.double() * 2
    m.twice[(n + 63) // 64, 64](x, n)
    torch.testing.assert_close(x.double(), ref, rtol=0, atol=0)
