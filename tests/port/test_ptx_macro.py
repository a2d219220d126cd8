"""tests/port/cuda/ptx_macro.cu: inline PTX written in a macro the kernel uses
(``#define LDMATRIX(R, addr) asm volatile(...)``, as hand-written tensor-core GEMMs do) is
refused as inline PTX naming the macro, also through a second macro (NOTE [PTX through a
macro]). Before, the kernel passed the check and failed to compile on something else. A
macro whose definition in the branch the SYCL compile takes is portable is no reason."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_ptx_macros_refused_by_name():
    t = build.translate_file(CUDA / "ptx_macro.cu")
    direct, nested = t.report("load_direct"), t.report("load_nested")
    assert direct.status == "unsupported" and "inline PTX" in direct.reason
    assert "'LOAD_SHARED_U32'" in direct.reason
    assert nested.status == "unsupported" and "'LOAD_TWICE'" in nested.reason
    assert t.report("halve").status == "ok", t.report("halve").reason


@pytest.mark.l1
def test_portable_macro_runs(cuda_module):
    m = cuda_module("ptx_macro")
    n = 300
    x = torch.randn(n)
    ref = x.double() * 0.5
    y = x.clone()
    m.halve[(n + 63) // 64, 64](y, n)
    torch.testing.assert_close(y.double(), ref, rtol=0, atol=0)
