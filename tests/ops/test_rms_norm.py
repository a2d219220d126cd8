"""xvendor.rms_norm: numerics vs the fp64 oracle, bad input, opcheck, autograd."""

import pytest
import torch
from torch.library import opcheck

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape,wshape", [((7, 96), (96,)), ((2, 3, 33), (33,)),
                                          ((4, 5, 6), (5, 6)),  # normalise over two dims
                                          ((3, 17), None), ((0, 8), (8,))])
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_matches_oracle(gen, dtype, shape, wshape, eps):
    x = (torch.randn(*shape, generator=gen) * 3).to(dtype)
    w = None if wshape is None else torch.randn(*wshape, generator=gen).to(dtype)
    out = xvendor.rms_norm(x, w, eps)
    assert out.dtype == dtype and out.shape == x.shape
    assert oracle.rel_error(out, oracle.rms_norm(x, w, eps)) <= oracle.TOLERANCE[dtype]


def test_fp32_weight_with_bf16_activations(gen):
    x, w = torch.randn(6, 40, generator=gen).bfloat16(), torch.randn(40, generator=gen)
    out = xvendor.rms_norm(x, w)
    assert out.dtype == torch.bfloat16
    assert oracle.rel_error(out, oracle.rms_norm(x, w)) <= oracle.TOLERANCE[torch.bfloat16]


@pytest.mark.parametrize("args,match", [
    ((torch.randn(4, 8), torch.randn(7)), r"weight shape must equal the last dimensions of x"),
    ((torch.randn(4, 8), torch.randn(4, 8, 1)), r"weight shape must equal"),
    ((torch.randn(4, 8), torch.randn(8).half()), r"weight dtype must be x's"),
    ((torch.randn(4, 8), torch.randn(8), -1.0), r"eps must be None or a finite number >= 0"),
    ((torch.randn(4, 8), torch.randn(8), float("nan")), r"eps must be None or a finite"),
    ((torch.randint(0, 4, (4, 8)), None), r"x must be float32"),
    ((torch.tensor(1.0), None), r"x must have at least 1 dimension"),
    ((torch.randn(4, 8), torch.randn(8, device="meta")), r"weight must be on the same device"),
])
def test_bad_input_names_argument_and_rule(args, match):
    with pytest.raises(xvendor.ArgumentError, match=match):
        xvendor.rms_norm(*args)


@pytest.mark.parametrize("weight", [True, False])
def test_opcheck(weight):
    args = (torch.randn(4, 6, requires_grad=True), torch.randn(6, requires_grad=True) if weight else None, 1e-6)
    opcheck(torch.ops.xvendor.rms_norm.default, args)


@pytest.mark.parametrize("wshape", [(6,), (3, 6)])
def test_gradcheck_fp64(gen, wshape):
    x = torch.randn(2, 3, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(*wshape, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: xvendor.rms_norm(x, w, 1e-6), (x, w))


def test_bf16_grads_match_fp64_autograd(gen):
    x = torch.randn(8, 64, generator=gen).bfloat16().requires_grad_()
    w = torch.randn(64, generator=gen).requires_grad_()  # fp32 master weight
    g = torch.randn(8, 64, generator=gen)
    xvendor.rms_norm(x, w, 1e-6).float().backward(g)
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    oracle.rms_norm(xr, wr, 1e-6).backward(g.double())
    assert oracle.rel_error(x.grad, xr.grad) <= 2 * oracle.TOLERANCE[torch.bfloat16]
    assert w.grad.dtype == torch.float32
    assert oracle.rel_error(w.grad, wr.grad) <= 2 * oracle.TOLERANCE[torch.bfloat16]
