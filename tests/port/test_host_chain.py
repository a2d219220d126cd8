"""tests/port/cuda/host_chain.cu: a kernel named as a value at the end of a chain of host
templates is instantiated through (1) a local ``constexpr bool`` given as an explicit
template argument (was bound to its own name, ``neg``), (2) an ``if constexpr`` head alone
in an ``#ifndef`` branch whose block follows the ``#endif`` (tree-sitter lost the function:
ggml's launch_fattn_tile_switch_ncols1), (3) a call that gives a defaulted trailing
parameter (the parameter was not counted: the call looked like another overload's)."""

import pytest
import torch

from xvendor.port import branches, build

from .conftest import CUDA


@pytest.mark.l0
def test_chain_instantiates():
    rep = build.translate_file(CUDA / "host_chain.cu").report("repeat_add")
    assert rep.status == "ok", rep.reason
    assert sorted(i.args for i in rep.instantiations) == [["3", "false"], ["3", "true"]]  # folded
    fill = build.translate_file(CUDA / "host_chain.cu").report("fill_rep")
    assert [i.args for i in fill.instantiations] == [["3"]]  # launch_repeat(..., 32): 6 of 6


@pytest.mark.l0
def test_dangling_statement_head_in_a_branch_is_resolved():
    """``#ifndef X`` / ``if constexpr (c)`` / ``#endif`` / ``{ ... }``: the group is reduced to
    its taken branch (directives blanked, lines kept), as a group with split braces is; in
    ggml's fattn-tile.cuh, tree-sitter otherwise lost the function (only in the whole unit)."""
    src = (b"void f() {\n#ifndef OTHER\n    if constexpr (N <= 4)\n#endif // OTHER\n    {\n        g();\n    }\n"
           b"#ifdef A\n    h();\n#endif\n}\n")
    out = branches.resolve_split_branches(src)
    assert out.count(b"\n") == src.count(b"\n")
    assert b"#ifndef" not in out and b"if constexpr (N <= 4)" in out and b"#endif // OTHER" not in out
    assert b"#ifdef A" in out  # balanced, complete: left to the SYCL compiler
    src2 = b"void f() {\n#if defined(OTHER)\n    while (x)\n#else\n    if (y)\n#endif\n    {\n    }\n}\n"
    out2 = branches.resolve_split_branches(src2)
    assert b"while (x)" not in out2 and b"if (y)" in out2


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64])
def test_chain_kernels_run(cuda_module, block):
    m = cuda_module("host_chain")
    n = 130
    yf = torch.full((n,), float("nan"))
    m["fill_rep<3>"][(n + block - 1) // block, block](yf, n)
    assert bool((yf == 3).all())
    x = torch.randn(n)
    for neg in (False, True):
        y = torch.full((n,), float("nan"))
        m[f"repeat_add<3, ({str(neg).lower()})>"][(n + block - 1) // block, block](x, y, n)
        ref = (x + x) + x
        torch.testing.assert_close(y, -ref if neg else ref, rtol=0, atol=0)
