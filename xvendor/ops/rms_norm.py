"""``xvendor::rms_norm(x, weight=None, eps=None)``: torch's F.rms_norm over weight's dims.

y = x * rsqrt(mean(x^2) + eps) * weight, the mean taken over the last ``weight.dim()``
dimensions (the last one when weight is None), accumulated in fp32 for fp16/bf16.
``eps=None`` means ``torch.finfo(x.dtype).eps``, as in torch. The output has x's dtype;
weight may have x's dtype or float32 (fp32 master weights with bf16 activations).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from .. import numerics
from ..registry import dispatcher
from ._common import (ArgumentError, Case, OpSpec, acc_dtype, check_float, check_same_device,
                      check_tensor, define, fast_path_open, needs_grad)

OP = "rms_norm"
dispatch = dispatcher(OP)
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_WEIGHT = (type(None), torch.Tensor, torch.nn.Parameter)


def check(x, weight=None, eps=None) -> None:
    check_tensor(OP, "x", x)
    check_float(OP, "x", x)
    if x.dim() < 1:
        raise ArgumentError(OP, "x", "must have at least 1 dimension, got a 0-D tensor")
    if weight is not None:
        check_tensor(OP, "weight", weight)
        nd = weight.dim()
        if nd < 1 or nd > x.dim() or tuple(weight.shape) != tuple(x.shape[x.dim() - nd:]):
            raise ArgumentError(OP, "weight", f"shape must equal the last dimensions of x "
                                              f"{tuple(x.shape)}, got {tuple(weight.shape)}")
        if weight.dtype not in (x.dtype, torch.float32):
            raise ArgumentError(OP, "weight", f"dtype must be x's ({x.dtype}) or float32, "
                                              f"got {weight.dtype}")
        check_same_device(OP, "x", x, weight=weight)
    if eps is not None and not (isinstance(eps, (int, float)) and not isinstance(eps, bool)
                                and math.isfinite(eps) and eps >= 0):
        raise ArgumentError(OP, "eps", f"must be None or a finite number >= 0, got {eps!r}")


@torch.library.custom_op("xvendor::rms_norm", mutates_args=())
def rms_norm_op(x: Tensor, weight: Optional[Tensor] = None, eps: Optional[float] = None,
                backend: Optional[str] = None) -> Tensor:
    check(x, weight, eps)
    return dispatch(x.device, x.dtype, (x, weight, eps), backend)


@rms_norm_op.register_fake
def _(x, weight=None, eps=None, backend=None):
    check(x, weight, eps)
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    x, weight, eps, _ = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = torch.finfo(x.dtype).eps if eps is None else eps


def _backward(ctx, grad):
    # d/dx of x*r*w with r = rsqrt(mean(x^2)+eps): r * (gw - xhat * mean(gw * xhat))
    x, weight = ctx.saved_tensors
    need_x, need_weight = needs_grad(ctx, 2)
    acc = acc_dtype(x.dtype)
    dims = tuple(range(-(weight.dim() if weight is not None else 1), 0))
    xf, gf = x.to(acc), grad.to(acc)
    r = torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + ctx.eps)
    xhat = xf * r
    gw = gf * weight.to(acc) if weight is not None else gf
    gx = r * (gw - xhat * (gw * xhat).mean(dim=dims, keepdim=True))
    gweight = None
    if weight is not None and need_weight:
        lead = tuple(range(x.dim() - weight.dim()))
        gweight = (gf * xhat).sum(dim=lead) if lead else gf * xhat
        gweight = gweight.to(weight.dtype)
    return gx.to(x.dtype) if need_x else None, gweight, None, None


rms_norm_op.register_autograd(_backward, setup_context=_setup)


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float | None = None, *,
             backend: str | None = None) -> Tensor:
    """Root-mean-square normalisation over weight's dimensions; see the module docstring."""
    check(x, weight, eps)  # our errors, also at trace time
    if type(x) in _PLAIN and type(weight) in _WEIGHT and not x.requires_grad \
            and (weight is None or not weight.requires_grad) and fast_path_open():
        return dispatch(x.device, x.dtype, (x, weight, eps), backend)
    return rms_norm_op(x, weight, eps, backend)


def _cases(rand, device):
    yield Case("7x96 +weight", (rand(7, 96), rand(96), 1e-6), {})
    yield Case("3x5x33 no weight, odd width", (rand(3, 5, 33),), {})


SPEC = define(OpSpec(OP, rms_norm, check, oracle=numerics.rms_norm, cases=_cases))
