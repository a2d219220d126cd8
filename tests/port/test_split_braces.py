"""tests/port/cuda/split_braces.cu: braces opened in ``#if`` / ``#elif`` / ``#else`` branches
and closed after ``#endif`` (in a kernel body and in the host function launching it) are
resolved to the branch the preprocessor takes, so the kernels are reported, instantiated
and compute that branch."""

import pytest
import torch

from xvendor.port import branches, build

from .conftest import CUDA

SRC = CUDA / "split_braces.cu"


@pytest.mark.l0
def test_split_branches_resolved_balanced_ones_kept():
    src = b"#define A 1\n#if A\nif (x) {\n#else\nif (y) {\n#endif\n}\n#ifdef B\nint b;\n#endif\n"
    out = branches.resolve_split_branches(src)
    assert out.split(b"\n")[2] == b"if (x) {" and b"if (y)" not in out and b"#else" not in out
    assert b"#ifdef B\nint b;\n#endif" in out and len(out) == len(src)


@pytest.mark.l0
def test_kernels_with_split_braces_are_reported():
    t = build.translate_file(SRC)
    rep = t.report("split_kernel")
    assert rep.status == "ok", rep.reason
    assert [i.args for i in rep.instantiations] == [["true"]]
    assert t.report("after_split").status == "ok"


@pytest.mark.l1
def test_split_kernel_takes_the_evaluated_branch(cuda_module):
    m = cuda_module("split_braces")
    n = 90
    x = torch.randn(n, generator=torch.Generator().manual_seed(4))
    y = torch.full((n,), float("nan"))
    m["split_kernel<true>"][(n + 63) // 64, 64](x, y, n)
    torch.testing.assert_close(y, x * x + 1)  # the #elif LEVEL >= 2 branch
    m.after_split[(n + 63) // 64, 64](y, n)
    torch.testing.assert_close(y, 2 * (x * x + 1))
