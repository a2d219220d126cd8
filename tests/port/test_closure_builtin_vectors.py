"""tests/port/cuda/builtin_vector_fallback.cu: a definition of a CUDA built-in vector type
(``struct float2``) in a host-only build's ``#else`` is left out (NOTE [built-in vector
types] in closure.py; was 'redefinition of float2'), and device qualifiers spelled through
two levels of macros (``#define IHD INLINE DEVICE``) make device code (parse.py; the
operator and function were dropped as host code)."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_fallback_dropped_and_macro_qualified_functions_kept():
    t = build.translate_file(CUDA / "builtin_vector_fallback.cu")
    assert t.report("signed_area").status == "ok"
    assert "struct float2 {" not in t.source and "struct int2 {" not in t.source
    assert "operator-(const float2& a" in t.source and "float cross2(" in t.source


@pytest.mark.l1
def test_signed_area(cuda_module):
    m = cuda_module("builtin_vector_fallback")
    n, pts = 500, 64
    p = torch.randn(pts, 2)
    idx = torch.randint(0, pts, (n, 2), dtype=torch.int32)
    out = torch.full((n,), float("nan"))
    m.signed_area[(n + 127) // 128, 128](p, idx, out, n)
    a, b = p.double()[idx[:, 0].long()], p.double()[idx[:, 1].long()]
    d = b - a
    torch.testing.assert_close(out.double(), d[:, 0] * a[:, 1] - d[:, 1] * a[:, 0], rtol=1e-5, atol=1e-5)
