"""``xvendor::gemm(a, b, bias=None, out_dtype=None)``: out = a @ b (+ bias), torch's mm/addmm.

a (M, K), b (K, N), bias (N,), fp32/fp16/bf16 (fp64 on the reference) with fp32
accumulation; ``out_dtype`` (default: a's dtype) is the dtype of the result. Any strides
work: transposed weights (``w.t()`` of an nn.Linear) are the common case.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..registry import decide, fall_back
from ._common import (FAST_DTYPES, ArgumentError, acc_dtype, needs_grad, check_bias, check_float, check_out_dtype,
                      check_same_device, check_tensor, decide_and_run, eager_fast, m_bucket,
                      operand_layout)

OP = "gemm"


def check(a, b, bias, out_dtype) -> None:
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


def shape_class(a, b, bias, out_dtype):
    """(layout, M bucket, N, K, groups, out dtype): what a tuned winner is keyed on."""
    return (operand_layout(a) + operand_layout(b), m_bucket(a.shape[0]), b.shape[1],
            a.shape[1], 0, str(out_dtype or a.dtype).removeprefix("torch."))


@torch.library.custom_op("xvendor::gemm", mutates_args=())
def gemm_op(a: Tensor, b: Tensor, bias: Optional[Tensor] = None,
            out_dtype: Optional[torch.dtype] = None, backend: Optional[str] = None) -> Tensor:
    check(a, b, bias, out_dtype)
    return decide_and_run(OP, a, backend, (a, b, bias, out_dtype), shape_class)


@gemm_op.register_fake
def _(a, b, bias=None, out_dtype=None, backend=None):
    check(a, b, bias, out_dtype)
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
    if eager_fast(a, b, bias):
        sa, sb, dt, dev = a.shape, b.shape, a.dtype, a.device
        # A positive filter for the common call (it implies every rule of check()); anything
        # else, bias and out_dtype included, takes the full check with its precise errors.
        if not (len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0] and dt in FAST_DTYPES
                and b.dtype is dt and bias is None and out_dtype is None and b.device == dev):
            check(a, b, bias, out_dtype)
        dec = decide(OP, dev, dt, backend, shape_class, (a, b, bias, out_dtype))
        try:
            return dec.kernel(a, b, bias, out_dtype)
        except Exception as e:
            return fall_back(dec, (a, b, bias, out_dtype), e)
    check(a, b, bias, out_dtype)  # our errors, also at trace time, before the schema's
    return gemm_op(a, b, bias, out_dtype, backend)
