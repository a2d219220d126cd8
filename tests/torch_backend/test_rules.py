"""The CPU rows of ``xvendor.torch_backend.rules`` against torch itself: on each side of
every rule, torch's op is called, and it runs exactly where the rule says it does (the GPU
rows cannot be run here: ``l2``, ``bench/gpu_check.sh``)."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.functional import ScalingType as S

from xvendor import registry
from xvendor.torch_backend import kernels, rules

pytestmark = pytest.mark.l0

CPU = registry.device_info(torch.device("cpu"))
OFFS = torch.tensor([3, 3, 8], dtype=torch.int32)


def _torch_runs(fn) -> bool:
    try:
        fn()
        return True
    except (RuntimeError, ValueError, NotImplementedError):
        return False


def _rule(op):
    return rules.accepts(op, CPU)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_grouped_mm_dtypes(dtype):
    a, b = torch.randn(10, 16, dtype=dtype), torch.randn(3, 16, 8, dtype=dtype)
    accepted = _rule("grouped_mm")(a, b, OFFS, None, None) is None
    assert accepted == (dtype in rules.GROUPED_MM_DTYPES["cpu"])
    assert _torch_runs(lambda: F.grouped_mm(a, b, offs=OFFS)) == accepted


LAYOUTS = {  # name: tensor; which ones torch takes as they are
    "row-major, 16-byte rows": (lambda: torch.randn(10, 16), True),
    "column-major view": (lambda: torch.randn(16, 12).t(), True),
    "row-major, 24-byte rows": (lambda: torch.randn(10, 6), False),
    "column slice, offset 4 bytes": (lambda: torch.randn(10, 20)[:, 1:17], True),  # cpu
    "every other row": (lambda: torch.randn(20, 16)[::2], True),
    "neither row- nor column-major": (lambda: torch.randn(10, 32)[:, ::2], False),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_strides_torch_takes_are_kept_and_the_others_staged(layout):
    make, takes = LAYOUTS[layout]
    a = make()
    b = torch.randn(3, a.shape[1], 8)
    assert _torch_runs(lambda: F.grouped_mm(a, b, offs=OFFS)) == takes
    staged = kernels._aligned(a)
    assert (staged is a) == takes
    assert torch.equal(staged, a)
    assert _torch_runs(lambda: F.grouped_mm(staged, b, offs=OFFS))


def test_out_dtype_and_bias_are_not_native_on_cpu():
    a = torch.randn(10, 16, dtype=torch.bfloat16)
    b = torch.randn(3, 16, 8, dtype=torch.bfloat16)
    assert "cpu" not in rules.GROUPED_MM_NATIVE_OUT and "cpu" not in rules.MM_NATIVE_OUT
    assert not _torch_runs(lambda: F.grouped_mm(a, b, offs=OFFS, out_dtype=torch.float32))
    assert not _torch_runs(lambda: torch._grouped_mm(a, b, offs=OFFS, bias=torch.randn(3, 8)))
    assert not _torch_runs(lambda: torch.mm(a, a.t(), out_dtype=torch.float32))
    out = kernels.grouped_mm(a, b, OFFS, torch.randn(3, 8), torch.float32)  # emulated
    assert out.dtype == torch.float32 and torch.equal(out[8:], torch.zeros(2, 8))


def _fp8(shape):
    return torch.randn(*shape).to(torch.float8_e4m3fn)


SCALES = {S.TensorWise: (lambda m, n: (torch.tensor(0.5), torch.tensor(2.0))),
          S.RowWise: (lambda m, n: (torch.rand(m, 1), torch.rand(1, n)))}


@pytest.mark.parametrize("ra,rb", [(S.TensorWise, S.TensorWise), (S.RowWise, S.RowWise),
                                   (S.TensorWise, S.RowWise), (S.RowWise, S.TensorWise)])
def test_scaled_mm_recipes(ra, rb):
    a, b = _fp8((16, 64)), _fp8((24, 64)).t()
    sa, sb = SCALES[ra](16, 24)[0], SCALES[rb](16, 24)[1]
    accepted = _rule("scaled_mm")(a, b, sa, ra.value, sb, rb.value, 0, 0, None,
                                  torch.bfloat16) is None
    assert accepted == ((ra.value, rb.value) in rules.SCALED_MM[("cpu", "*")][0])
    assert _torch_runs(lambda: F.scaled_mm(a, b, sa, ra, sb, rb)) == accepted


def test_mx_and_scaled_grouped_mm_are_not_on_cpu():
    a, b = _fp8((16, 64)), _fp8((24, 64)).t()
    sa = torch.ones(16, 2).to(torch.float8_e8m0fnu)
    sb = torch.ones(24, 2).to(torch.float8_e8m0fnu)
    assert _rule("scaled_mm")(a, b, sa, 3, sb, 3, 0, 0, None, torch.bfloat16) is not None
    assert isinstance(_rule("scaled_grouped_mm"), str)  # no call at all: selection skips it
    assert not _torch_runs(lambda: F.scaled_mm(a, b, sa, S.BlockWise1x32, sb, S.BlockWise1x32))
    w = _fp8((3, 24, 64)).transpose(-2, -1)
    offs = torch.tensor([4, 8, 16], dtype=torch.int32)
    assert not _torch_runs(lambda: F.scaled_grouped_mm(a, w, torch.rand(16), S.RowWise,
                                                       torch.rand(3, 24), S.RowWise, offs=offs))


def test_rms_norm_with_an_fp32_weight_on_bf16_is_left_to_the_reference():
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    assert _rule("rms_norm")(x, torch.randn(64), None) is not None
    assert _rule("rms_norm")(x, torch.randn(64, dtype=torch.bfloat16), None) is None
    assert _rule("gemm") is None and _rule("topk") is None  # torch takes every call
