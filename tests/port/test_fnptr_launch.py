"""tests/port/cuda/fnptr_launch.cu: kernel templates reached only through function pointers
(passed to a launch helper, taken by address, host launchers returned as pointers of an
alias type) are instantiated from what names them, and those instantiations run. Numerics
against torch references, outputs poisoned first."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA

SRC = CUDA / "fnptr_launch.cu"


@pytest.mark.l0
def test_kernel_passed_or_taken_by_address_is_instantiated():
    rep = build.translate_file(SRC).report("apply")
    assert rep.status == "ok"
    assert sorted(i.args for i in rep.instantiations) == [["float", "0"], ["float", "1"]]


@pytest.mark.l0
def test_host_template_returned_as_pointer_binds_from_the_alias():
    # to_f64_cuda_t (an alias template's instance) and to_f32_cuda_t (a pointer typedef)
    rep = build.translate_file(SRC).report("widen")
    assert rep.status == "ok"
    assert sorted(i.args for i in rep.instantiations) == [["double"], ["float"]]


@pytest.mark.l1
@pytest.mark.parametrize("op", [0, 1])
def test_pointer_instantiations_run(cuda_module, op):
    m = cuda_module("fnptr_launch")
    n = 200
    x = torch.randn(n, generator=torch.Generator().manual_seed(op))
    y = torch.full((n,), float("nan"))
    m[f"apply<float, {op}>"][(n + 63) // 64, 64](x, y, n)
    torch.testing.assert_close(y, x * 2 if op == 0 else x + 1)


@pytest.mark.l1
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_widen_instantiations_run(cuda_module, dtype):
    m = cuda_module("fnptr_launch")
    n = 130
    x = torch.randn(n, generator=torch.Generator().manual_seed(5))
    y = torch.full((n,), float("nan"), dtype=dtype)
    name = "float" if dtype == torch.float32 else "double"
    m[f"widen<{name}>"][(n + 63) // 64, 64](x, y, n)
    torch.testing.assert_close(y, x.to(dtype) * 3)


@pytest.mark.l0
def test_commented_template_arguments_and_pointer_arithmetic():
    t = build.translate_file(SRC)
    assert [i.args for i in t.report("shift").instantiations] == [["true"]]
    assert [i.args for i in t.report("halve").instantiations] == [["double"]]


@pytest.mark.l1
def test_shift_and_halve_run(cuda_module):
    m = cuda_module("fnptr_launch")
    n = 77
    x = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    y = torch.full((n,), float("nan"), dtype=torch.float64)
    m["shift<true>"][(n + 63) // 64, 64](x, y, n)
    torch.testing.assert_close(y, 1.0 - x)
    m["halve<double>"][(n + 63) // 64, 64](x, y, n)
    torch.testing.assert_close(y, x / 2)


@pytest.mark.l0
def test_local_type_alias_in_template_arguments():
    rep = build.translate_file(SRC).report("fill_value")
    assert [i.args for i in rep.instantiations] == [["Fill<7>"]]


@pytest.mark.l1
def test_local_alias_instantiation_runs(cuda_module):
    m = cuda_module("fnptr_launch")
    n = 70
    y = torch.full((n,), -1, dtype=torch.int32)
    m["fill_value<Fill<7>>"][(n + 63) // 64, 64](y, n)
    assert torch.equal(y, torch.arange(n, dtype=torch.int32) + 7)


@pytest.mark.l0
def test_explicit_kernel_instantiations():
    rep = build.translate_file(SRC).report("fill_sign")
    assert sorted(i.args for i in rep.instantiations) == [["false", "double"], ["true", "float"]]


@pytest.mark.l1
def test_explicit_kernel_instantiation_runs(cuda_module):
    m = cuda_module("fnptr_launch")
    y = torch.full((50,), float("nan"))
    m["fill_sign<true, float>"][1, 64](y, 2.5, 50)
    assert torch.equal(y, torch.full((50,), -2.5))
