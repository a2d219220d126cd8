"""tests/port/cuda/static_assert_inst.cu: an instantiation whose compile fails only on the
kernel's own static_assert is one the real program cannot make (nvcc would reject it), so
it is left out with a lint, and the kernel compiles with its other instantiations (NOTE
[static_assert instantiations] in build.py); before, the whole kernel was compile_error."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l1
def test_failing_instantiation_left_out(sycl_device):
    r = build.compile_translation(CUDA / "static_assert_inst.cu")
    rep = r.translation.report("sum_n")
    assert rep.status == "ok" and r.program is not None
    assert sorted(i.args for i in rep.instantiations) == [["2"], ["4"]]
    assert any("sum_n<5> left out" in x and "static_assert" in x for x in rep.lints), rep.lints


@pytest.mark.l1
@pytest.mark.parametrize("n", [2, 4])
def test_kept_instantiations_run(cuda_module, n):
    m = cuda_module("static_assert_inst")
    rows = 77
    x = torch.randn(rows, n, dtype=torch.float64).float()
    y = torch.full((rows,), float("nan"))
    m[f"sum_n<{n}>"][(rows + 31) // 32, 32](x, y, rows)
    ref = (x.double() * torch.arange(1, n + 1, dtype=torch.float64)).sum(1)
    torch.testing.assert_close(y.double(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.l1
def test_a_kernel_failing_everywhere_stays_an_error(sycl_device, tmp_path):
    src = tmp_path / "all_fail.cu"
    src.write_text("template <int N> __global__ void k(float *y) { static_assert(N > 10, \"no\"); y[0] = N; }\n"
                   "void run(float *y) { k<1><<<1, 32>>>(y); k<2><<<1, 32>>>(y); }\n")
    rep = build.compile_translation(src).translation.report("k")
    assert rep.status == "compile_error" and "static" in rep.reason
