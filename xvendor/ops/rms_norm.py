"""``xvendor::rms_norm(x, weight=None, eps=None)``: torch's F.rms_norm over weight's dims,
and its gradient ``xvendor::rms_norm_backward(grad, x, weight=None, eps=None) -> (dx, dweight)``.

y = x * rsqrt(mean(x^2) + eps) * weight, the mean taken over the last ``weight.dim()``
dimensions (the last one when weight is None), accumulated in fp32 for fp16/bf16.
``eps=None`` means what torch's rms_norm does: the machine epsilon of the dtype it computes
in (float32's for fp16/bf16/fp32, float64's for fp64; NOTE [rms_norm's default eps] in
``xvendor.numerics``). The output has x's dtype;
weight may have x's dtype or float32 (fp32 master weights with bf16 activations).

The backward is an op of its own, dispatched like the forward (a backend may serve it:
the ``flydsl`` record does): with r = rsqrt(mean(x^2) + eps), xhat = x * r, gw = grad *
weight, dx = r * (gw - xhat * mean(gw * xhat)) in x's dtype and dweight = sum over the
leading dims of grad * xhat in weight's dtype (fp32 accumulation). Without a weight,
dweight is an empty (0,) tensor of x's dtype: torch.library ops cannot return an optional
tensor. ``rms_norm``'s autograd calls it with the backend the forward was asked for
(argument, ``use_backend`` or ``XVENDOR_BACKEND`` at forward time), or ``reference`` where that
backend has no backward kernel (``sycl``). The backward op has no autograd of its own (no
double backward).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from .. import numerics, registry, shapes
from ..registry import dispatcher, floor_trainer
from ..registry import requested_in_context as _in_context
from ._common import (CPU, FAST_DTYPES, ArgumentError, Case, OpSpec, check_float,
                      check_same_device, check_tensor, define, eager_autograd, fast_path_open,
                      needs_grad, traced_torch, traced)

OP = "rms_norm"
BWD = "rms_norm_backward"
dispatch = dispatcher(OP)
dispatch_backward = dispatcher(BWD)
train_floor = floor_trainer(OP)
direct = dispatch.direct  # NOTE [straight to the floor]
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_WEIGHT = (type(None), torch.Tensor, torch.nn.Parameter)


def _check(op: str, x, weight, eps) -> None:
    check_tensor(op, "x", x)
    check_float(op, "x", x)
    nx = x.dim()
    if nx < 1:
        raise ArgumentError(op, "x", "must have at least 1 dimension, got a 0-D tensor")
    if weight is not None:
        check_tensor(op, "weight", weight)
        nd = weight.dim()
        if nd < 1 or nd > nx or weight.shape != x.shape[nx - nd:]:
            raise ArgumentError(op, "weight", f"shape must equal the last dimensions of x "
                                              f"{tuple(x.shape)}, got {tuple(weight.shape)}")
        if weight.dtype is not x.dtype and weight.dtype is not torch.float32:
            raise ArgumentError(op, "weight", f"dtype must be x's ({x.dtype}) or float32, "
                                              f"got {weight.dtype}")
        if weight.device != x.device:
            check_same_device(op, "x", x, weight=weight)
    if eps is not None and not (type(eps) is float and 0 <= eps < math.inf) and not (
            isinstance(eps, (int, float)) and not isinstance(eps, bool)
            and math.isfinite(eps) and eps >= 0):
        raise ArgumentError(op, "eps", f"must be None or a finite number >= 0, got {eps!r}")


def check(x, weight=None, eps=None) -> None:
    # the common call (a 1-D weight of x's dtype over x's last dim, a float eps) in one
    # expression: a positive filter that implies every rule below (NOTE [floor overhead])
    if type(x) in _PLAIN and type(weight) in _PLAIN and type(eps) is float \
            and 0.0 <= eps < math.inf and weight.ndim == 1 and x.ndim >= 1 \
            and x.dtype in FAST_DTYPES and weight.dtype is x.dtype \
            and x.shape[-1] == weight.shape[0] \
            and (x.is_cpu and weight.is_cpu or weight.device == x.device):
        return
    _check(OP, x, weight, eps)


def check_backward(grad, x, weight=None, eps=None) -> None:
    """The forward's rules on (x, weight, eps); grad is the output's gradient: x's shape,
    dtype and device."""
    check_tensor(BWD, "grad", grad)
    _check(BWD, x, weight, eps)
    if tuple(grad.shape) != tuple(x.shape) or grad.dtype != x.dtype:
        raise ArgumentError(BWD, "grad", f"must have x's shape and dtype ({tuple(x.shape)}, "
                                         f"{x.dtype}), got {tuple(grad.shape)}, {grad.dtype}")
    check_same_device(BWD, "x", x, grad=grad)


@torch.library.custom_op("xvendor::rms_norm", mutates_args=())
def rms_norm_op(x: Tensor, weight: Optional[Tensor] = None, eps: Optional[float] = None,
                backend: Optional[str] = None) -> Tensor:
    check(x, weight, eps)
    return dispatch(x.device, x.dtype, (x, weight, eps), backend)


@rms_norm_op.register_fake
def _(x, weight=None, eps=None, backend=None):
    check(x, weight, eps)
    traced(OP)
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    x, weight, eps, backend = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = numerics.rms_norm_eps(x.dtype, eps)
    ctx.backend = _backward_backend(backend)


def _backward_backend(backend):
    """The backend the backward is asked for: the one the forward was asked for, read now
    (a ``use_backend`` block around the forward has usually ended by backward), or the
    reference where that backend has no backward kernel (explicit, so a request for it in
    the environment cannot make the backward raise)."""
    requested = registry.requested_backend(backend)
    record = registry.backends().get(requested) if requested else None
    if record is not None and not record.implements(BWD):
        return registry.REFERENCE
    return requested


def _backward(ctx, grad):
    x, weight = ctx.saved_tensors
    need_x, need_weight = needs_grad(ctx, 2)
    dx, dweight = rms_norm_backward(grad, x, weight, ctx.eps, backend=ctx.backend)
    return (dx if need_x else None, dweight if weight is not None and need_weight else None,
            None, None)


@torch.library.custom_op("xvendor::rms_norm_backward", mutates_args=())
def rms_norm_backward_op(grad: Tensor, x: Tensor, weight: Optional[Tensor] = None,
                         eps: Optional[float] = None,
                         backend: Optional[str] = None) -> tuple[Tensor, Tensor]:
    check_backward(grad, x, weight, eps)
    return dispatch_backward(x.device, x.dtype, (grad, x, weight, eps), backend)


@rms_norm_backward_op.register_fake
def _(grad, x, weight=None, eps=None, backend=None):
    check_backward(grad, x, weight, eps)
    return torch.empty_like(x), (torch.empty_like(weight) if weight is not None
                                 else x.new_empty(0))


rms_norm_op.register_autograd(_backward, setup_context=_setup)


def _forward(x, weight, eps, backend):
    return dispatch(x.device, x.dtype, (x, weight, eps), backend)


_train = eager_autograd("xvendor_rms_norm", _forward, _setup, _backward)
_grad_enabled = torch.is_grad_enabled


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float | None = None, *,
             backend: str | None = None) -> Tensor:
    """Root-mean-square normalisation over weight's dimensions; see the module docstring."""
    check(x, weight, eps)  # our errors, also at trace time
    if type(x) in _PLAIN and type(weight) in _WEIGHT and fast_path_open():
        if _grad_enabled() and (x.requires_grad or (weight is not None and weight.requires_grad)):
            out = train_floor(CPU if x.is_cpu else x.device, x.dtype, (x, weight, eps), backend)
            if out is not None:  # NOTE [eager training on the floor]
                return out
            return _train(x, weight, eps, backend)  # NOTE [eager training path]
        dev = CPU if x.is_cpu else x.device  # (NOTE [the CPU device object])
        if backend is None and (floor := direct.get((dev, x.dtype))) and _in_context() is None:
            return floor(x, weight, eps)  # NOTE [straight to the floor]
        return dispatch(dev, x.dtype, (x, weight, eps), backend)
    if (floor := traced_torch(OP, x.device, x.dtype, (x, weight, eps), backend)):
        return floor(x, weight, eps)
    return rms_norm_op(x, weight, eps, backend)


def rms_norm_backward(grad: Tensor, x: Tensor, weight: Tensor | None = None,
                      eps: float | None = None, *, backend: str | None = None
                      ) -> tuple[Tensor, Tensor]:
    """(dx, dweight) of ``rms_norm(x, weight, eps)`` for the output gradient ``grad``; see
    the module docstring (dweight is an empty tensor without a weight)."""
    check_backward(grad, x, weight, eps)
    if type(grad) in _PLAIN and type(x) in _PLAIN and type(weight) in _WEIGHT \
            and not (grad.requires_grad or x.requires_grad) \
            and (weight is None or not weight.requires_grad) and fast_path_open():
        return dispatch_backward(x.device, x.dtype, (grad, x, weight, eps), backend)
    return rms_norm_backward_op(grad, x, weight, eps, backend)


def _cases(rand, device):
    yield Case("7x96 +weight", (rand(7, 96), rand(96), 1e-6), {})
    yield Case("3x5x33 no weight, odd width", (rand(3, 5, 33),), {})


def _backward_cases(rand, device):
    yield Case("7x96 +weight", (rand(7, 96), rand(7, 96), rand(96), 1e-6), {})
    yield Case("3x5x33 no weight, odd width", (rand(3, 5, 33), rand(3, 5, 33)), {})
    yield Case("2x4x5x6 weight over two dims", (rand(2, 4, 5, 6), rand(2, 4, 5, 6),
                                                rand(5, 6)), {})


def backward_oracle(grad, x, weight=None, eps=None):
    """(dx, dweight) in fp64: autograd of the fp64 forward oracle."""
    xd = x.detach().double().requires_grad_()
    wd = weight.detach().double().requires_grad_() if weight is not None else None
    with torch.enable_grad():
        y = numerics.rms_norm(xd, wd, eps)
        inputs = (xd, wd) if wd is not None else (xd,)
        grads = torch.autograd.grad(y, inputs, grad.double())
    return grads[0], (grads[1] if wd is not None else xd.new_empty(0))


def _backward_error(out, expected, args, kwargs) -> float:
    """0 when dx and dweight have the op's dtypes and shapes and each is within
    ``numerics.TOLERANCE`` of its own dtype (normwise, against the fp64 oracle); else the
    worse error / tolerance (> 1), inf for a dtype or shape mismatch. Normalized as
    ``scaled_mm``'s: dweight may be fp32 while ``xvendor check`` compares with the
    tolerance of x's dtype."""
    grad, x, weight = (tuple(args) + (None,))[:3]
    dx, dweight = out
    w_dtype = weight.dtype if weight is not None else x.dtype
    if dx.dtype != x.dtype or dx.shape != x.shape or dweight.dtype != w_dtype \
            or dweight.shape != expected[1].shape:
        return float("inf")
    ratio = max(numerics.rel_error(dx, expected[0]) / numerics.TOLERANCE[x.dtype],
                numerics.rel_error(dweight, expected[1]) / numerics.TOLERANCE[w_dtype])
    return 0.0 if ratio <= 1 else ratio


SPEC = define(OpSpec(OP, rms_norm, check, oracle=numerics.rms_norm, cases=_cases,
                     shape_class=shapes.rms_norm_class))
BACKWARD_SPEC = define(OpSpec(BWD, rms_norm_backward, check_backward, oracle=backward_oracle,
                              cases=_backward_cases, error=_backward_error,
                              shape_class=shapes.rms_norm_backward_class))
