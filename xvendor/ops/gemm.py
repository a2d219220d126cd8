"""``xvendor::gemm(a, b, bias=None, out_dtype=None)``: out = a @ b (+ bias), torch's mm/addmm.

a (M, K), b (K, N), bias (N,), fp32/fp16/bf16 (fp64 on the reference) with fp32
accumulation; ``out_dtype`` (default: a's dtype) is the dtype of the result. Any strides
work: transposed weights (``w.t()`` of an nn.Linear) are the common case.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .. import numerics, shapes
from ..registry import dispatcher, floor_trainer
from ..registry import requested_in_context as _in_context
from ._common import (CPU, FAST_DTYPES, ArgumentError, Case, OpSpec, _compiling, _dispatch_modes,
                      _fast_path as fast_path, _fn_mode, _functorch, _profiling, acc_dtype,
                      check_bias, check_float, check_out_dtype, check_same_device,
                      check_tensor, define, eager_autograd, fast_path_open, needs_grad,
                      traced_torch, traced)

OP = "gemm"
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _check_plain(a, b, bias, out_dtype) -> None:
    """``check`` of a call without bias and out_dtype: a positive filter for the common
    call (it implies every rule of ``check``), the full check with its precise errors
    otherwise."""
    dt = a.dtype
    if not (a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0] and dt in FAST_DTYPES
            and b.dtype is dt and b.device == a.device):
        check(a, b)


dispatch = dispatcher(OP)  # for checked arguments
dispatch_plain = dispatcher(OP, check=_check_plain)
train_floor = floor_trainer(OP)
direct = dispatch_plain.direct  # NOTE [straight to the floor]


def check(a, b, bias=None, out_dtype=None) -> None:
    check_tensor(OP, "a", a)
    check_tensor(OP, "b", b)
    if a.dim() != 2:
        raise ArgumentError(OP, "a", f"must be 2-D (M, K), got shape {tuple(a.shape)}")
    if b.dim() != 2:
        raise ArgumentError(OP, "b", f"must be 2-D (K, N), got shape {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ArgumentError(OP, "b", f"inner dimensions must match: a is (M, K) = "
                                     f"{tuple(a.shape)}, b is (K, N) = {tuple(b.shape)}")
    check_float(OP, "a", a)
    if b.dtype != a.dtype:
        raise ArgumentError(OP, "b", f"dtype must equal a's dtype ({a.dtype}), got {b.dtype}")
    check_same_device(OP, "a", a, b=b)
    check_out_dtype(OP, a.dtype, out_dtype)
    check_bias(OP, bias, (b.shape[1],), a.dtype, out_dtype, a, "(N,)")


@torch.library.custom_op("xvendor::gemm", mutates_args=())
def gemm_op(a: Tensor, b: Tensor, bias: Optional[Tensor] = None,
            out_dtype: Optional[torch.dtype] = None, backend: Optional[str] = None) -> Tensor:
    check(a, b, bias, out_dtype)
    return dispatch(a.device, a.dtype, (a, b, bias, out_dtype), backend)


@gemm_op.register_fake
def _(a, b, bias=None, out_dtype=None, backend=None):
    check(a, b, bias, out_dtype)
    traced(OP)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or a.dtype)


def _setup(ctx, inputs, output):
    a, b, bias, out_dtype, backend = inputs
    ctx.save_for_backward(a, b)
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.backend = backend


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    need_a, need_b, need_bias = needs_grad(ctx, 3)
    g = grad.to(a.dtype)
    ga = gemm(g, b.t(), backend=ctx.backend) if need_a else None
    gb = gemm(a.t(), g, backend=ctx.backend) if need_b else None
    gbias = grad.sum(0, dtype=acc_dtype(grad.dtype)).to(ctx.bias_dtype) if need_bias else None
    return ga, gb, gbias, None, None


gemm_op.register_autograd(_backward, setup_context=_setup)


def gemm(a: Tensor, b: Tensor, bias: Tensor | None = None, out_dtype: torch.dtype | None = None,
         *, backend: str | None = None) -> Tensor:
    """a @ b (+ bias) on the best kernel for the device; see the module docstring."""
    if type(a) in _PLAIN and type(b) in _PLAIN and fast_path[0] and not (
            a.requires_grad or b.requires_grad or _compiling() or _fn_mode()
            or _dispatch_modes() or _functorch() or _profiling()):  # fast_path_open(), inline
        dev, dt = CPU if a.is_cpu else a.device, a.dtype  # NOTE [the CPU device object]
        if bias is None and out_dtype is None:  # checked in there (NOTE [dispatch cost])
            if backend is None and (floor := direct.get((dev, dt))) and _in_context() is None:
                return floor(a, b, None, None)  # NOTE [straight to the floor]
            return dispatch_plain(dev, dt, (a, b, None, None), backend)
        if bias is None or (type(bias) in _PLAIN and not bias.requires_grad):
            check(a, b, bias, out_dtype)
            return dispatch(dev, dt, (a, b, bias, out_dtype), backend)
    check(a, b, bias, out_dtype)  # our errors, also at trace time, before the schema's
    if type(a) in _PLAIN and type(b) in _PLAIN and type(bias) in _BIAS and fast_path_open():
        if _grad_enabled():  # it needs gradients: NOTE [eager training path]
            out = train_floor(CPU if a.is_cpu else a.device, a.dtype, (a, b, bias, out_dtype),
                              backend)
            if out is not None:  # NOTE [eager training on the floor]
                return out
            return _train(a, b, bias, out_dtype, backend)
        return dispatch(CPU if a.is_cpu else a.device, a.dtype, (a, b, bias, out_dtype), backend)
    if (floor := traced_torch(OP, a.device, a.dtype, (a, b, bias, out_dtype), backend)):
        return floor(a, b, bias, out_dtype)
    return gemm_op(a, b, bias, out_dtype, backend)


def _forward(a, b, bias, out_dtype, backend):
    return dispatch(a.device, a.dtype, (a, b, bias, out_dtype), backend)


_train = eager_autograd("xvendor_gemm", _forward, _setup, _backward)
_BIAS = (type(None), torch.Tensor, torch.nn.Parameter)
_grad_enabled = torch.is_grad_enabled


def _cases(rand, device):
    yield Case("67x45x33 +bias, b transposed", (rand(67, 33), rand(45, 33).t(), rand(45)), {})
    yield Case("40x24x72 out=fp32", (rand(40, 72), rand(72, 24)), {"out_dtype": torch.float32})


SPEC = define(OpSpec(
    OP, gemm, check,
    oracle=lambda a, b, bias=None, out_dtype=None: numerics.gemm(a, b, bias),
    cases=_cases, shape_class=shapes.gemm_class))
