"""tests/port/cuda/macro_instantiations.cu: explicit instantiations written through a
file-scope macro use (``#define MAKE_apply(op, T) template __global__ void apply<T, op>(...);``
then ``MAKE_apply(MUL, float)``, also through a macro that uses it) instantiate the kernel
(NOTE [instantiations through a macro]); before, it had none. The uses are dropped from
the SYCL source like written explicit instantiations: before, they were kept, and those of a
refused kernel failed the build of every other kernel of the file."""

import re

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_macro_made_instantiations_found_and_uses_dropped():
    t = build.translate_file(CUDA / "macro_instantiations.cu")
    rep = t.report("apply")
    assert rep.status == "ok", rep.reason
    assert sorted(i.args for i in rep.instantiations) == [
        ["double", "ADD"], ["double", "MUL"], ["float", "MUL"]]
    tiled = t.report("apply_tiled")  # a run of six uses: four eager, the rest deferred
    assert tiled.status == "ok", tiled.reason
    assert len(tiled.instantiations) + len(tiled.deferred) == 6
    assert t.report("block_total").status == "unsupported"
    body = re.sub(r"^[ \t]*#define(?:[^\n]*\\\n)*[^\n]*|//[^\n]*", "", t.source, flags=re.M)
    assert "MAKE_apply(" not in body and "MAKE_all(" not in body and "MAKE_tiled(" not in body
    assert "(," not in body  # no pieces of a use left behind


@pytest.mark.l1
def test_run_of_macro_made_instantiations_runs(cuda_module):
    m = cuda_module("macro_instantiations")
    n = 300
    y = torch.randn(n, generator=torch.Generator().manual_seed(2))
    ref = (y.double() * 3).float()
    m["apply_tiled<float, MUL, 64, 2>"][(n + 127) // 128, 64](y, 3.0, n)
    torch.testing.assert_close(y, ref, rtol=0, atol=0)


@pytest.mark.l1
@pytest.mark.parametrize("dtype,op", [(torch.float32, "MUL"), (torch.float64, "ADD"),
                                      (torch.float64, "MUL")])
def test_macro_made_instantiations_run(cuda_module, dtype, op):
    m = cuda_module("macro_instantiations")
    n = 200
    x = torch.randn(n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    y = x.to(dtype)
    x = y.double()
    ref = (x * 3 if op == "MUL" else x + 3).to(dtype)  # one rounding from fp64
    name = "float" if dtype == torch.float32 else "double"
    m[f"apply<{name}, {op}>"][(n + 63) // 64, 64](y, 3.0, n)
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
