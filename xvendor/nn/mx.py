"""MX (block-scaled FP8) training: ``convert_to_mx_training`` and the modules it installs.

    model = xvendor.nn.convert_to_mx_training(model)          # in place; returns model

Every GEMM of a converted module runs as ``xvendor.scaled_mm`` / ``scaled_grouped_mm`` on
MXFP8 operands (float8_e4m3fn elements, one E8M0 scale per 32 elements along the
contraction dimension, RCEIL scales: ``xvendor.quantize``), in the spirit of torchao's MX
training recipe:

    forward   y  = x @ w.T           x quantized along K,  w along K
    dgrad     gx = gy @ w            gy quantized along N, w along N
    wgrad     gw = gy.T @ x          gy quantized along M, x along M

Each operand is quantized again along the dimension its GEMM contracts, so every block of
32 shares one scale along the sum, which is what the MX format requires. Quantization is
not differentiated (a straight-through estimator: the gradient of the quantized GEMM with
respect to its high-precision inputs is taken as the gradient of the GEMM); master weights
stay in their dtype, and the optimizer sees ordinary gradients.

The autograd functions are public for code with its own modules (a trainer's converter):
``MXLinearFunction.apply(x, weight, bias)`` and ``MXGroupedMMFunction.apply(x, weight, offs)``.

What gets converted:
- ``nn.Linear`` with in_features and out_features multiples of 32 (MX blocks along both
  contraction dimensions). Token counts need not be: the wgrad pads M to a multiple of 32
  with zero rows, which add nothing to the sum.
- ``xvendor.nn.GroupedLinear`` (MoE experts): forward and dgrad are 2Dx3D
  ``scaled_grouped_mm`` calls; the wgrad is the 2Dx2D (ragged K) form, whose group starts
  must sit on 32-element block boundaries, so each expert's token rows are padded with zero
  rows to a multiple of 32 first (this reads ``offs`` on the host: one device sync per
  backward of an expert layer).
- Not converted by default (``filter_fn=None``): a Linear named ``router`` or ``gate`` (the
  MoE router: a top-k decision flipped by low-precision rounding changes which expert a
  token reaches, not just a value), and everything that is not a GEMM (norms, embeddings).
  ``filter_fn(module, fqn) -> bool`` replaces that default.

Recipes: ``"mxfp8"`` only (e4m3 everywhere, the common MX training recipe); MXFP4 for training
and e5m2 gradients are not offered. Numerics: checked here against fp64 oracles of the same
quantized math on the CPU reference backend; on a GPU the same ops dispatch to whatever
backend serves scaled_mm there.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn
from torch.nn.functional import ScalingType

from ..ops import ArgumentError, quantize, scaled_grouped_mm, scaled_mm
from .modules import GroupedLinear

E4M3 = torch.float8_e4m3fn
MX = ScalingType.BlockWise1x32
BLOCK = 32
RECIPES = ("mxfp8",)
HIGH_PRECISION_NAMES = ("router", "gate")
_OUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _mx(t: Tensor) -> tuple[Tensor, Tensor]:
    """MXFP8 data and scales of t, blocks along its last dimension."""
    return quantize(t, E4M3, "mx", dim=-1)


def _pad_last(t: Tensor, to: int) -> Tensor:
    extra = -t.shape[-1] % to
    return nn.functional.pad(t, (0, extra)) if extra else t


def mx_mm(a: Tensor, bt: Tensor, out_dtype: torch.dtype) -> Tensor:
    """a (M, C) @ bt (N, C).T with both operands MX-quantized along C (the contraction);
    C is zero-padded to a multiple of 32 (zeros add nothing)."""
    qa, sa = _mx(_pad_last(a, BLOCK))
    qb, sb = _mx(_pad_last(bt, BLOCK))
    return scaled_mm(qa, qb.t(), sa, MX, sb, MX, output_dtype=out_dtype)


def mx_grouped_mm(a: Tensor, bt: Tensor, offs: Tensor, out_dtype: torch.dtype) -> Tensor:
    """2Dx3D: rows offs[g-1]:offs[g] of a (M, C) times bt[g] (N, C).T, both quantized along C."""
    qa, sa = _mx(a)
    qb, sb = _mx(bt)  # (G, N, C) data, (G, N, C/32) scales: scaled_grouped_mm's b scales
    return scaled_grouped_mm(qa, qb.transpose(1, 2), sa, MX, sb, MX, offs, output_dtype=out_dtype)


def _aligned_rows(offs: Tensor, rows: int) -> tuple[Tensor, Tensor]:
    """Where each of the first offs[-1] rows goes when every group is padded to a multiple of
    32 rows, and the padded groups' ends (int32)."""
    ends = offs.tolist()  # host read: group sizes decide the padded layout
    starts, dest, total, padded_ends = 0, [], 0, []
    for end in ends:
        size = end - starts
        dest.append(torch.arange(total, total + size))
        total += -(-size // BLOCK) * BLOCK
        padded_ends.append(total)
        starts = end
    index = torch.cat(dest) if dest else torch.empty(0, dtype=torch.long)
    return index.to(offs.device), torch.tensor(padded_ends, dtype=torch.int32, device=offs.device)


def mx_grouped_wgrad(x: Tensor, gy: Tensor, offs: Tensor, out_dtype: torch.dtype) -> Tensor:
    """gw[g] = x[rows g].T @ gy[rows g], (G, K, N), as the 2Dx2D ragged-K scaled_grouped_mm
    with both operands quantized along the token dimension, groups padded to 32 rows."""
    index, padded = _aligned_rows(offs, x.shape[0])
    used = index.shape[0]
    total = int(padded[-1]) if padded.numel() else 0
    xp = x.new_zeros((total, x.shape[1])).index_copy_(0, index, x[:used])
    gp = gy.new_zeros((total, gy.shape[1])).index_copy_(0, index, gy[:used])
    qa, sa = _mx(xp.t())  # (K, Mp) along tokens
    qb, sb = _mx(gp.t())  # (N, Mp) along tokens
    return scaled_grouped_mm(qa, qb.t(), sa, MX, sb, MX, padded, output_dtype=out_dtype)


def _out_dtype(t: Tensor) -> torch.dtype:
    return t.dtype if t.dtype in _OUT_DTYPES else torch.float32


class MXLinearFunction(torch.autograd.Function):
    """``y = x @ weight.T (+ bias)`` with all three GEMMs in MXFP8 (the module docstring's
    forward / dgrad / wgrad), as an autograd function for code that owns its parameters:
    ``MXLinearFunction.apply(x, weight, bias)``. x (..., K), weight (N, K), bias (N,) or
    None; K and N are zero-padded to multiples of 32 where a GEMM contracts them. The
    output has x's dtype (float32 for other dtypes) before the bias is added."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        x2 = x.reshape(-1, x.shape[-1])
        y = mx_mm(x2, weight, _out_dtype(x))
        if bias is not None:
            y = y + bias.to(y.dtype)
        return y.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, gy: Tensor):
        x, weight = ctx.saved_tensors
        x2, g2 = x.reshape(-1, x.shape[-1]), gy.reshape(-1, gy.shape[-1])
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = mx_mm(g2, weight.t(), _out_dtype(x)).reshape(x.shape)
        if ctx.needs_input_grad[1]:
            gw = mx_mm(g2.t(), x2.t(), _out_dtype(weight))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g2.sum(0, dtype=torch.float32)
        return gx, gw, gb


class MXGroupedMMFunction(torch.autograd.Function):
    """The 2Dx3D grouped GEMM ``out[rows of g] = x[rows of g] @ weight[g]`` in MXFP8, as an
    autograd function: ``MXGroupedMMFunction.apply(x, weight, offs)``. x (M, K) tokens
    sorted by group, weight (G, K, N), offs int32 cumulative group ends. K and N must be
    multiples of 32 (the forward and dgrad contractions); groups may have any size (the
    wgrad pads each to 32 rows, reading ``offs`` on the host). Gradients flow to x and
    weight (any strides: a transposed view is fine)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, offs: Tensor):
        ctx.save_for_backward(x, weight, offs)
        return mx_grouped_mm(x, weight.transpose(1, 2), offs, _out_dtype(x))

    @staticmethod
    def backward(ctx, gy: Tensor):
        x, weight, offs = ctx.saved_tensors
        gx = gw = None
        if ctx.needs_input_grad[0]:
            gx = mx_grouped_mm(gy, weight, offs, _out_dtype(x))  # weight (G, K, N): along N
        if ctx.needs_input_grad[1]:
            gw = mx_grouped_wgrad(x, gy, offs, _out_dtype(weight))
        return gx, gw, None


class MXLinear(nn.Linear):
    """``nn.Linear`` whose three GEMMs run in MXFP8 (see the module docstring)."""

    recipe = "mxfp8"

    def forward(self, x: Tensor) -> Tensor:
        out = MXLinearFunction.apply(x, self.weight, self.bias)
        return out if self.bias is None else out.to(x.dtype)


class MXGroupedLinear(GroupedLinear):
    """``GroupedLinear`` whose forward, dgrad and wgrad run in MXFP8; bias, if any, is added
    in high precision per group (``scaled_grouped_mm`` has no bias)."""

    recipe = "mxfp8"

    def forward(self, x: Tensor, offs: Tensor) -> Tensor:
        y = MXGroupedMMFunction.apply(x, self.weight, offs)
        if self.bias is not None:
            rows = torch.arange(x.shape[0], device=x.device, dtype=torch.int32)
            group = torch.searchsorted(offs, rows, right=True)
            live = (group < offs.shape[0]).unsqueeze(-1)
            bias = self.bias[group.clamp(max=max(offs.shape[0] - 1, 0))]
            y = y + torch.where(live, bias.to(y.dtype), 0)
        return y


def _default_filter(module: nn.Module, fqn: str) -> bool:
    return fqn.rsplit(".", 1)[-1] not in HIGH_PRECISION_NAMES


def _convertible(module: nn.Module) -> str | None:
    """Why ``module`` cannot run in MX (None: it can)."""
    k, n = module.in_features, module.out_features
    if k % BLOCK or n % BLOCK:
        return (f"in_features={k} and out_features={n} must be multiples of {BLOCK} "
                f"(MX blocks along both contraction dimensions)")
    return None


def convert_to_mx_training(model: nn.Module, recipe: str = "mxfp8",
                           filter_fn: Callable[[nn.Module, str], bool] | None = None,
                           ) -> nn.Module:
    """Swap, in place, every ``nn.Linear`` and ``GroupedLinear`` that ``filter_fn`` accepts
    (default: all but routers, see the module docstring) for its MX version; parameters are
    kept (the same Parameter objects, so an optimizer built before still updates them).
    Modules whose sizes cannot be MX-blocked are left alone; ``model.mx_skipped`` lists them
    with the reason. Returns ``model``."""
    if recipe not in RECIPES:
        raise ArgumentError("nn.convert_to_mx_training", "recipe",
                            f"must be one of {RECIPES}, got {recipe!r}")
    if filter_fn is not None and not callable(filter_fn):
        raise ArgumentError("nn.convert_to_mx_training", "filter_fn",
                            f"must be callable(module, fqn) -> bool, got {filter_fn!r}")
    accept = filter_fn or _default_filter
    skipped: dict[str, str] = {}
    for fqn, module in list(model.named_modules()):
        if type(module) is nn.Linear:
            target = MXLinear
        elif type(module) is GroupedLinear:
            target = MXGroupedLinear
        else:
            continue
        if not accept(module, fqn):
            continue
        why = _convertible(module)
        if why:
            skipped[fqn] = why
            continue
        module.__class__ = target  # same parameters, buffers and hooks; only forward changes
    model.mx_skipped = skipped
    return model
