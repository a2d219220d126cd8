"""``xvendor::topk(x, k, dim=-1, largest=True, sorted=True) -> (values, indices)``: torch.topk.

The MoE router's op. Indices are int64. Gradients flow to x through the values (the
router's gate weights): grad_x is grad_values scattered to the chosen indices.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .. import numerics, shapes
from ..registry import dispatcher, floor_trainer
from ..registry import requested_in_context as _in_context
from ._common import (CPU, ArgumentError, Case, OpSpec, check_float, check_int, check_tensor,
                      define, eager_autograd, fast_path_open, traced_torch)

OP = "topk"
dispatch = dispatcher(OP)
train_floor = floor_trainer(OP)
direct = dispatch.direct  # NOTE [straight to the floor]
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def check(x, k, dim=-1, largest=True, sorted=True) -> None:
    check_tensor(OP, "x", x)
    check_float(OP, "x", x)
    nd = x.dim()
    # the common call first, in plain comparisons (this runs on every call); the messages
    # are built only for a broken rule
    if nd >= 1 and type(dim) is int and -nd <= dim < nd and type(k) is int \
            and 0 <= k <= x.shape[dim] and type(largest) is bool and type(sorted) is bool:
        return
    if nd < 1:
        raise ArgumentError(OP, "x", "must have at least 1 dimension, got a 0-D tensor")
    dims = f"in [{-nd}, {nd - 1}] for x of shape {tuple(x.shape)}"
    check_int(OP, "dim", dim, dims)  # a bool is no dim: torch refuses topk(x, 4, True)
    if not -nd <= dim < nd:
        raise ArgumentError(OP, "dim", f"must be an int {dims}, got {dim!r}")
    n = x.shape[dim]
    check_int(OP, "k", k, f"in [0, {n}] (the size of dim {dim})")
    if not 0 <= k <= n:
        raise ArgumentError(OP, "k", f"must be an int in [0, {n}] (the size of dim {dim}), "
                                     f"got {k!r}")
    for name, flag in (("largest", largest), ("sorted", sorted)):
        if not isinstance(flag, bool):
            raise ArgumentError(OP, name, f"must be a bool, got {flag!r}")


@torch.library.custom_op("xvendor::topk", mutates_args=())
def topk_op(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True,
            backend: Optional[str] = None) -> tuple[Tensor, Tensor]:
    check(x, k, dim, largest, sorted)
    return dispatch(x.device, x.dtype, (x, k, dim, largest, sorted), backend)


@topk_op.register_fake
def _(x, k, dim=-1, largest=True, sorted=True, backend=None):
    check(x, k, dim, largest, sorted)
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


def _forward(x, k, dim, largest, sorted, backend):
    return dispatch(x.device, x.dtype, (x, k, dim, largest, sorted), backend)


_train = eager_autograd("xvendor_topk", _forward, _setup, _backward)
_grad_enabled = torch.is_grad_enabled


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *,
         backend: str | None = None) -> tuple[Tensor, Tensor]:
    """The k largest (or smallest) entries of x along dim, with their int64 indices."""
    check(x, k, dim, largest, sorted)  # our errors, also at trace time
    if type(x) in _PLAIN and fast_path_open():
        if x.requires_grad and _grad_enabled():  # NOTE [eager training path]
            out = train_floor(CPU if x.is_cpu else x.device, x.dtype, (x, k, dim, largest, sorted),
                              backend)
            if out is not None:  # NOTE [eager training on the floor]
                return out
            return _train(x, k, dim, largest, sorted, backend)
        dev = CPU if x.is_cpu else x.device  # (NOTE [the CPU device object])
        if backend is None and (floor := direct.get((dev, x.dtype))) and _in_context() is None:
            return floor(x, k, dim, largest, sorted)  # NOTE [straight to the floor]
        return dispatch(dev, x.dtype, (x, k, dim, largest, sorted), backend)
    if (floor := traced_torch(OP, x.device, x.dtype, (x, k, dim, largest, sorted), backend)):
        return floor(x, k, dim, largest, sorted)
    return topk_op(x, k, dim, largest, sorted, backend)


def _cases(rand, device):
    yield Case("9x50 k=8", (rand(9, 50), 8), {})
    yield Case("6x40 k=5 dim=0 smallest", (rand(6, 40), 5), {"dim": 0, "largest": False})


def _error(out, expected, args, kwargs) -> float:
    """Values against the oracle, and the indices must point at those values."""
    values, idx = out
    if values.dtype != args[0].dtype or idx.dtype != torch.int64 \
            or values.shape != expected.shape or idx.shape != expected.shape:
        return float("inf")
    dim = kwargs.get("dim", -1)
    picked = args[0].gather(dim, idx)
    return max(numerics.rel_error(values, expected), numerics.rel_error(picked, values))


SPEC = define(OpSpec(
    OP, topk, check,
    oracle=lambda x, k, dim=-1, largest=True, sorted=True: numerics.topk_values(x, k, dim, largest),
    cases=_cases, error=_error, shape_class=shapes.topk_class))
