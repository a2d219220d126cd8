"""tests/port/cuda/parse_recovery.cu: a parse error stays inside the file-scope declaration
it is in (prototypes wrapped in attribute macros, a device table spelled through
function-like macros that open and close its braces), and the #if/#define lines of a dropped
host function stay, so the kernels after them are found, compiled and run; launch bounds
(computed, with a third argument) are hints, never a refusal."""

import pytest
import torch

from xvendor.port import build, parse

from .conftest import CUDA

SRC = CUDA / "parse_recovery.cu"


@pytest.mark.l0
def test_errors_contained_to_their_declaration():
    u = parse.parse_file(SRC)
    assert [f.name for f in u.kernels] == ["scale_after_errors", "weigh", "bounded_add"]
    blanked = [u.source[a:b].decode().split("(")[0] for a, b in u.opaque]
    assert blanked == ["API_DEPRECATED", "API_DEPRECATED", "TABLE_BEGIN"]
    a, b = u.opaque[-1]  # the table ends at TABLE_END(), not at the end of the next kernel
    assert u.source[a:b].rstrip().endswith(b"TABLE_END()")


@pytest.mark.l0
def test_declaration_end_reads_macros_and_nesting():
    src = b"M(void f(int), \"h\");\nint g;"
    assert parse._declaration_end(src, 0) == src.index(b";") + 1
    src = b"struct S { int a; } ;\nint g;"
    assert parse._declaration_end(src, 0) == src.index(b";\n") + 1
    src = b"#define B(n) int n[] = {\n#define E() };\nB(t) 1, 2\nE()\nint g;"
    at = src.index(b"B(t)")
    assert parse._declaration_end(src, at, parse._macro_effects(src)) == src.rindex(b"E()") + 3


@pytest.mark.l0
def test_translation_keeps_device_code_drops_host():
    t = build.translate_file(SRC)
    assert {k.name: k.status for k in t.kernels} == {"scale_after_errors": "ok", "weigh": "ok",
                                                "bounded_add": "ok"}
    body = t.source.split("xvendor_cuda_compat_more.h")[1]
    assert "tensor_new_old" not in body and "tensor_nbytes_f" not in body  # host prototypes
    assert "configure_host" not in body  # the host function goes, its #define stays
    assert "#define TILE_FACTOR 3.0f" in body and "#ifndef TILE_FACTOR" in body
    assert "TABLE_BEGIN(float, weights, 4)" in body  # device table kept


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128])
def test_kernels_after_parse_errors_run(cuda_module, block):
    m = cuda_module("parse_recovery")
    n = 300
    grid = (n + block - 1) // block
    x = torch.randn(n, generator=torch.Generator().manual_seed(block))
    y = torch.full((n,), float("nan"))
    m.scale_after_errors[grid, block](y, x, n)
    torch.testing.assert_close(y.double(), 3.0 * x.double())
    y.fill_(float("nan"))
    m.weigh[grid, block](y, x, n)
    w = torch.tensor([1.0, 2.0, 4.0, 8.0], dtype=torch.float64).repeat(n // 4 + 1)[:n]
    torch.testing.assert_close(y.double(), w * x.double())
    y.fill_(float("nan"))
    m.bounded_add[grid, block](y, x, n)  # launch bounds are hints: any block size runs
    torch.testing.assert_close(y.double(), x.double() + 1.0)
