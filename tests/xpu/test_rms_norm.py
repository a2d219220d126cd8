"""xvendor.rms_norm(backend="sycl") on CPU tensors through the CPU SYCL device vs fp64."""

import pytest
import torch

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l1
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,wdims", [((7, 300), 1),  # rows longer than the work-group
                                         ((3, 5, 33), 1),  # short rows: idle work-items
                                         ((4, 6, 20), 2),  # weight over the last two dims
                                         ((1, 4097), 1),  # one long row, odd length
                                         ((5, 64), 0)])  # no weight
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_matches_oracle(gen, launches, dtype, shape, wdims, eps):
    x = torch.randn(*shape, generator=gen).to(dtype)
    w = torch.randn(*shape[len(shape) - wdims:], generator=gen).to(dtype) if wdims else None
    out = xvendor.rms_norm(x, w, eps, backend="sycl")
    assert launches("rms_norm_") == 1
    assert out.dtype == dtype and out.shape == x.shape
    assert oracle.rel_error(out, oracle.rms_norm(x, w, eps)) <= oracle.TOLERANCE[dtype]


def test_fp32_weight_with_bf16_activations_and_strided_x(gen, launches):
    x = torch.randn(9, 2, 130, generator=gen).to(torch.bfloat16)[:, 1]  # non-contiguous
    w = torch.randn(130, generator=gen)  # fp32 master weight
    out = xvendor.rms_norm(x, w, 1e-6, backend="sycl")
    assert launches("rms_norm_bf16") == 1
    assert oracle.rel_error(out, oracle.rms_norm(x, w, 1e-6)) <= oracle.TOLERANCE[torch.bfloat16]


def test_scale_extremes(gen, launches):
    x = torch.randn(4, 256, generator=gen) * torch.tensor([1e-3, 1.0, 1e3, 1e15]).unsqueeze(1)
    out = xvendor.rms_norm(x, None, 1e-6, backend="sycl")
    assert oracle.rel_error(out, oracle.rms_norm(x, None, 1e-6)) <= oracle.TOLERANCE[torch.float32]
