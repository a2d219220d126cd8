"""``xvendor::grouped_mm(a, b, offs=None, bias=None, out_dtype=None)``: torch._grouped_mm, whole.

The four layouts of ``torch._grouped_mm``; ``offs`` holds int32 cumulative group ends
along the ragged dimension:

    layout   a           b           out          ragged dim (offs)   bias
    2Dx3D    (M, K)      (G, K, N)   (M, N)       rows of a, M        (G, N)
    3Dx2D    (G, M, K)   (K, N)      (M, N)       cols of b, N        (N,)
    2Dx2D    (M, K)      (K, N)      (G, M, N)    K                   (G, N)
    3Dx3D    (G, M, K)   (G, K, N)   (G, M, N)    none (offs=None)    (G, N)

Unlike torch: bias and out_dtype work on every device, any size and stride is accepted,
and rows (2Dx3D) / columns (3Dx2D) past ``offs[-1]`` come out as zeros, not garbage.
Groups may be empty. The backward of every layout is again a grouped_mm (2Dx3D's weight
gradient is the 2Dx2D form), so backends accelerate training, not only inference.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .. import numerics, shapes
from ..registry import dispatcher, floor_trainer
from ..registry import requested_in_context as _in_context
from ._common import (CPU, FAST_DTYPES, ArgumentError, Case, OpSpec, acc_dtype, check_bias,
                      check_float, check_group_ends, check_out_dtype, check_same_device,
                      check_tensor, define, eager_autograd, fast_path_open, needs_grad,
                      traced_torch, traced)

OP = "grouped_mm"
dispatch = dispatcher(OP)
train_floor = floor_trainer(OP)
direct = dispatch.direct  # NOTE [straight to the floor]
_RAGGED = {"m": "rows of a", "n": "columns of b", "k": "K (columns of a)"}
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_grad_enabled = torch.is_grad_enabled
problem = shapes.grouped_problem


def check(a, b, offs=None, bias=None, out_dtype=None) -> shapes.GroupedProblem:
    """Metadata rules (no data reads; the fake implementation runs these too); the call's
    ``GroupedProblem``, which the backends, the gate and the fake build from."""
    try:  # the common ragged call in one expression: a positive filter (NOTE [floor overhead])
        if bias is None and out_dtype is None and offs is not None \
                and a.dtype in FAST_DTYPES and b.dtype is a.dtype and offs.dtype is _I32 \
                and offs.ndim == 1 and a.shape[-1] == b.shape[-2] \
                and (a.is_cpu and b.is_cpu and offs.is_cpu  # (cheaper than 3 devices)
                     or a.device == b.device == offs.device) \
                and offs.shape[0] == _GROUPS_OF[(a.ndim, b.ndim)](a, b, offs):
            return problem(a, b, offs)
    except (AttributeError, KeyError, IndexError, TypeError):
        pass  # not tensors, other ranks: the rules below name what is wrong
    check_tensor(OP, "a", a)
    check_tensor(OP, "b", b)
    for name, t in (("a", a), ("b", b)):
        if t.dim() not in (2, 3):
            raise ArgumentError(OP, name, f"must be 2-D or 3-D, got shape {tuple(t.shape)}")
    check_float(OP, "a", a)
    if b.dtype != a.dtype:
        raise ArgumentError(OP, "b", f"dtype must equal a's dtype ({a.dtype}), got {b.dtype}")
    check_same_device(OP, "a", a, b=b, offs=offs)
    k_a, k_b = a.shape[-1], b.shape[-2]
    if k_a != k_b:
        raise ArgumentError(OP, "b", f"inner dimensions must match: a {tuple(a.shape)} has "
                                     f"K={k_a}, b {tuple(b.shape)} has K={k_b}")
    layout = (a.dim(), b.dim())
    if layout == (3, 3):
        if offs is not None:
            raise ArgumentError(OP, "offs", "must be None for 3-D x 3-D (batched) inputs")
        if a.shape[0] != b.shape[0]:
            raise ArgumentError(OP, "b", f"group count must equal a's: a has {a.shape[0]} "
                                         f"groups, b has {b.shape[0]}")
    else:
        _check_offs_meta(a, b, offs, layout)
    check_out_dtype(OP, a.dtype, out_dtype)
    p = problem(a, b, offs)
    check_bias(OP, bias, p.bias_shape, a.dtype, out_dtype, a, p.bias_rule)
    return p


_I32 = torch.int32
# (a.ndim, b.ndim) -> the length offs must have (2Dx2D: any but 0; no 3Dx3D: offs is None)
_GROUPS_OF = {(2, 3): lambda a, b, offs: b.shape[0], (3, 2): lambda a, b, offs: a.shape[0],
              (2, 2): lambda a, b, offs: offs.shape[0] or -1}


def _check_offs_meta(a, b, offs, layout) -> None:
    if offs is None:
        along = _RAGGED[{(2, 3): "m", (3, 2): "n", (2, 2): "k"}[layout]]
        raise ArgumentError(OP, "offs", f"is required for {layout[0]}-D x {layout[1]}-D inputs "
                                        f"(int32 cumulative ends along the {along})")
    check_tensor(OP, "offs", offs)
    if offs.dtype != torch.int32:
        raise ArgumentError(OP, "offs", f"must be int32 (cumulative group ends), got {offs.dtype}")
    if offs.dim() != 1:
        raise ArgumentError(OP, "offs", f"must be 1-D, got shape {tuple(offs.shape)}")
    if layout == (2, 3) and offs.shape[0] != b.shape[0]:
        raise ArgumentError(OP, "offs", f"must have one entry per group of b: b has "
                                        f"{b.shape[0]} groups, offs has {offs.shape[0]}")
    if layout == (3, 2) and offs.shape[0] != a.shape[0]:
        raise ArgumentError(OP, "offs", f"must have one entry per group of a: a has "
                                        f"{a.shape[0]} groups, offs has {offs.shape[0]}")
    if layout == (2, 2) and offs.shape[0] == 0:
        raise ArgumentError(OP, "offs", "must have at least one group for 2-D x 2-D inputs")


def check_offs_values(p: shapes.GroupedProblem, offs, traced: bool = False) -> None:
    """Data rules on offs (``check_group_ends``) along the problem's ragged dimension."""
    if offs is not None:
        check_group_ends(OP, offs, p.extent, _RAGGED[p.ragged], traced=traced)


@torch.library.custom_op("xvendor::grouped_mm", mutates_args=())
def grouped_mm_op(a: Tensor, b: Tensor, offs: Optional[Tensor] = None,
                  bias: Optional[Tensor] = None, out_dtype: Optional[torch.dtype] = None,
                  backend: Optional[str] = None) -> Tensor:
    check_offs_values(check(a, b, offs, bias, out_dtype), offs)
    return dispatch(a.device, a.dtype, (a, b, offs, bias, out_dtype), backend)


@grouped_mm_op.register_fake
def _(a, b, offs=None, bias=None, out_dtype=None, backend=None):
    traced(OP)
    return a.new_empty(check(a, b, offs, bias, out_dtype).out_shape, dtype=out_dtype or a.dtype)


def _setup(ctx, inputs, output):
    a, b, offs, bias, out_dtype, backend = inputs
    ctx.save_for_backward(a, b, offs)
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.backend = backend


def _group_sum_rows(g: Tensor, offs: Tensor) -> Tensor:
    """Per-group row sums of g (M, N) in fp32-or-better; rows past offs[-1] are dropped."""
    rows = torch.arange(g.shape[0], device=g.device, dtype=torch.int32)
    ids = torch.searchsorted(offs, rows, right=True)  # == G for rows past the last group
    sums = g.new_zeros((offs.shape[0] + 1, g.shape[1]), dtype=acc_dtype(g.dtype))
    return sums.index_add_(0, ids, g.to(sums.dtype))[:-1]


def _again(a, b, offs=None, backend=None):
    """One grouped_mm of the backward. The forward's checks hold for it (its shapes come
    from checked ones; ``offs`` is the saved tensor, which autograd refuses once modified),
    so in eager mode with no graph to build (no ``create_graph``) it goes straight to the
    dispatcher: NOTE [eager training path]."""
    if type(a) in _PLAIN and type(b) in _PLAIN and not _grad_enabled() and fast_path_open():
        return dispatch(a.device, a.dtype, (a, b, offs, None, None), backend)
    return grouped_mm(a, b, offs, backend=backend)


def _backward(ctx, grad):
    a, b, offs = ctx.saved_tensors
    g = grad.to(a.dtype)
    need_a, need_b, _, need_bias = needs_grad(ctx, 4)
    layout, kw = (a.dim(), b.dim()), {"backend": ctx.backend}
    ga = gb = gbias = None
    if layout == (2, 3):  # out[rows g] = a[rows g] @ b[g]
        ga = _again(g, b.transpose(-2, -1), offs, **kw) if need_a else None
        gb = _again(a.t(), g, offs, **kw) if need_b else None  # the 2Dx2D weight grad
        gbias = _group_sum_rows(grad, offs) if need_bias else None
    elif layout == (3, 2):  # out[:, cols g] = a[g] @ b[:, cols g]
        ga = _again(g, b.t(), offs, **kw) if need_a else None
        gb = _again(a.transpose(-2, -1), g, offs, **kw) if need_b else None
        if need_bias:  # columns past offs[-1] got no bias, so they give it no gradient
            cols = grad.sum(0, dtype=acc_dtype(grad.dtype))
            end = offs[-1] if offs.numel() else 0
            live = torch.arange(grad.shape[1], device=grad.device) < end
            gbias = torch.where(live, cols, torch.zeros_like(cols))
    elif layout == (2, 2):  # out[g] = a[:, K g] @ b[K g, :]
        ga = _again(g, b.t(), offs, **kw) if need_a else None
        gb = _again(a.t(), g, offs, **kw) if need_b else None
        gbias = grad.sum(1, dtype=acc_dtype(grad.dtype)) if need_bias else None
    else:
        ga = _again(g, b.transpose(-2, -1), **kw) if need_a else None
        gb = _again(a.transpose(-2, -1), g, **kw) if need_b else None
        gbias = grad.sum(1, dtype=acc_dtype(grad.dtype)) if need_bias else None
    if gbias is not None:
        gbias = gbias.to(ctx.bias_dtype)
    return ga, gb, None, gbias, None, None


grouped_mm_op.register_autograd(_backward, setup_context=_setup)


def _forward(a, b, offs, bias, out_dtype, backend):
    return dispatch(a.device, a.dtype, (a, b, offs, bias, out_dtype), backend)


_train = eager_autograd("xvendor_grouped_mm", _forward, _setup, _backward)


def grouped_mm(a: Tensor, b: Tensor, offs: Tensor | None = None, bias: Tensor | None = None,
               out_dtype: torch.dtype | None = None, *, backend: str | None = None) -> Tensor:
    """Ragged / batched matmul over groups; the layouts are in the module docstring."""
    p = check(a, b, offs, bias, out_dtype)  # our errors, also at trace time
    if type(a) in _PLAIN and type(b) in _PLAIN and type(offs) in _OFFS \
            and type(bias) in _BIAS and fast_path_open():
        check_offs_values(p, offs)
        if _grad_enabled() and (a.requires_grad or b.requires_grad or (
                bias is not None and bias.requires_grad)):
            # torch's backward takes the output's gradient as it comes: its rows must meet
            # its stride rule (16 bytes), which a dense gradient does where N does
            if b.shape[-1] * (out_dtype or a.dtype).itemsize % 16 == 0 and (out := train_floor(
                    CPU if a.is_cpu else a.device, a.dtype, (a, b, offs, bias, out_dtype),
                    backend)) is not None:
                return out  # NOTE [eager training on the floor]
            return _train(a, b, offs, bias, out_dtype, backend)  # NOTE [eager training path]
        dev = CPU if a.is_cpu else a.device  # (NOTE [the CPU device object])
        if backend is None and (floor := direct.get((dev, a.dtype))) and _in_context() is None:
            return floor(a, b, offs, bias, out_dtype)  # NOTE [straight to the floor]
        return dispatch(dev, a.dtype, (a, b, offs, bias, out_dtype), backend)
    if (floor := traced_torch(OP, a.device, a.dtype, (a, b, offs, bias, out_dtype), backend)):
        check_offs_values(p, offs, traced=True)  # NOTE [offs in a traced graph]
        return floor(a, b, offs, bias, out_dtype)
    return grouped_mm_op(a, b, offs, bias, out_dtype, backend)


_OFFS = (type(None), torch.Tensor)
_BIAS = (type(None), torch.Tensor, torch.nn.Parameter)


def _cases(rand, device):
    offs = numerics.random_offs([5, 0, 17, 9], device)  # an empty group; 31 of 33 rows used
    yield Case("2Dx3D ragged, empty group, rows past offs[-1], +bias",
               (rand(33, 40), rand(4, 40, 24), offs, rand(4, 24)), {})
    yield Case("3Dx2D ragged columns", (rand(4, 12, 40), rand(40, 33), offs), {})
    yield Case("2Dx2D ragged K (weight gradient)", (rand(12, 33), rand(33, 20), offs), {})
    yield Case("3Dx3D batched +bias", (rand(3, 9, 20), rand(3, 20, 11), None, rand(3, 11)), {})


SPEC = define(OpSpec(
    OP, grouped_mm, check,
    oracle=lambda a, b, offs=None, bias=None, out_dtype=None: numerics.grouped_mm(a, b, offs, bias),
    cases=_cases, shape_class=shapes.grouped_mm_class))
