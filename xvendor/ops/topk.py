"""``xvendor::topk(x, k, dim=-1, largest=True, sorted=True) -> (values, indices)``: torch.topk.

The MoE router's op. Indices are int64. Gradients flow to x through the values (the
router's gate weights): grad_x is grad_values scattered to the chosen indices.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ._common import ArgumentError, check_float, check_tensor, decide_and_run, eager_fast

OP = "topk"


def check(x, k, dim) -> None:
    check_tensor(OP, "x", x)
    check_float(OP, "x", x)
    if x.dim() < 1:
        raise ArgumentError(OP, "x", "must have at least 1 dimension, got a 0-D tensor")
    if not isinstance(dim, int) or not -x.dim() <= dim < x.dim():
        raise ArgumentError(OP, "dim", f"must be an int in [{-x.dim()}, {x.dim() - 1}] for x of "
                                       f"shape {tuple(x.shape)}, got {dim!r}")
    n = x.shape[dim]
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= n:
        raise ArgumentError(OP, "k", f"must be an int in [0, {n}] (the size of dim {dim}), "
                                     f"got {k!r}")


@torch.library.custom_op("xvendor::topk", mutates_args=())
def topk_op(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True,
            backend: Optional[str] = None) -> tuple[Tensor, Tensor]:
    check(x, k, dim)
    return decide_and_run(OP, x, backend, (x, k, dim, largest, sorted))


@topk_op.register_fake
def _(x, k, dim=-1, largest=True, sorted=True, backend=None):
    check(x, k, dim)
    shape = list(x.shape)
    shape[dim] = k
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)


def _setup(ctx, inputs, output):
    x, k, dim, *_ = inputs
    ctx.save_for_backward(output[1])
    ctx.shape, ctx.dim = x.shape, dim


def _backward(ctx, grad_values, grad_indices):
    (indices,) = ctx.saved_tensors
    gx = grad_values.new_zeros(ctx.shape).scatter(ctx.dim, indices, grad_values)
    return gx, None, None, None, None, None


topk_op.register_autograd(_backward, setup_context=_setup)


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *,
         backend: str | None = None) -> tuple[Tensor, Tensor]:
    """The k largest (or smallest) entries of x along dim, with their int64 indices."""
    if eager_fast(x):
        check(x, k, dim)
        return decide_and_run(OP, x, backend, (x, k, dim, largest, sorted))
    check(x, k, dim)  # our errors, also at trace time
    return topk_op(x, k, dim, largest, sorted, backend)
