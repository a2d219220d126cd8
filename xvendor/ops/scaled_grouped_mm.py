"""``xvendor::scaled_grouped_mm``: torch.nn.functional.scaled_grouped_mm, two of its layouts.

    xvendor.scaled_grouped_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, *,
                              swizzle_a=None, swizzle_b=None, output_dtype=torch.bfloat16,
                              backend=None)

Element dtypes, dtype pairings, recipe enums, swizzles (NO_SWIZZLE only), output dtypes
and fp4 packing (two per byte along K, lower K index in the low nibble) follow
``xvendor.scaled_mm``; ``offs`` are int32 cumulative group ends as in ``grouped_mm``.

    layout            a        b          recipe         scale_a          scale_b
    2Dx3D (MoE fwd)   (M, K)   (G, K, N)  RowWise        fp32 (M,)        fp32 (G, N)
                                          BlockWise1x32  e8m0 (M, K/32)   e8m0 (G, N, K/32)
    2Dx2D (ragged K)  (M, K)   (K, N)     BlockWise1x32  e8m0 (M, K/32)   e8m0 (N, K/32)

(fp4: a's and b's K dimension holds K/2 bytes.) The RowWise shapes are torch's; torch's MX
grouped scales are swizzled per group, which is not supported here, so MX scales are the
plain row-major blocks of ``xvendor.quantize`` (b's per group in torch's (N, K/32)
orientation). 2Dx3D: rows offs[g-1]:offs[g] of a use b[g]; rows past offs[-1] are zeros.
2Dx2D: out[g] = a[:, Kg] @ b[Kg, :], shape (G, M, N); every group start (0 and offs[:-1])
must be a multiple of 32 so that no E8M0 block straddles two groups. TensorWise, the
3Dx2D and 3Dx3D layouts and bias are not supported (ArgumentError).

Semantics (the ``reference`` kernel): dequantize both operands in fp32 as scaled_mm does, then
the fp32 ``grouped_mm`` reference, one rounding to output_dtype. Any strides; the fake
agrees with the eager op. Not differentiable.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor
from torch.nn.functional import ScalingType

from .. import numerics, shapes
from ..registry import dispatcher
from ._common import (ArgumentError, Case, OpSpec, check_group_ends, check_same_device,
                      check_tensor, define, fast_path_open, traced_torch, traced)
from .scaled_mm import (BLOCK, FP4, MX, NO_SWIZZLE, ROWWISE, E4, E5, check_operand_dtypes,
                        check_output_dtype, check_scale, recipe_id, swizzle_id)
from .scaled_mm import scaled_inputs
from .scaled_mm import error  # the same comparison: output dtype, shape, normwise error

OP = "scaled_grouped_mm"
dispatch = dispatcher(OP)
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _k(a) -> int:
    return a.shape[1] * (2 if a.dtype == FP4 else 1)


def check(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a=None, swizzle_b=None,
          output_dtype=torch.bfloat16) -> None:
    """Metadata rules (no data reads; the fake implementation runs these too)."""
    check_tensor(OP, "a", a)
    check_tensor(OP, "b", b)
    ra, rb = recipe_id(OP, "recipe_a", recipe_a), recipe_id(OP, "recipe_b", recipe_b)
    swizzle_id(OP, "swizzle_a", swizzle_a)
    swizzle_id(OP, "swizzle_b", swizzle_b)
    layout = (a.dim(), b.dim())
    if layout not in ((2, 3), (2, 2)):
        raise ArgumentError(OP, "b", f"layouts supported are 2Dx3D (a (M, K), b (G, K, N)) and "
                                     f"2Dx2D (ragged K), got a {tuple(a.shape)}, b "
                                     f"{tuple(b.shape)}")
    check_operand_dtypes(OP, a, b, ra, rb)
    if layout == (2, 3) and ra not in (ROWWISE, MX):
        raise ArgumentError(OP, "recipe_a", "must be RowWise or BlockWise1x32 for 2Dx3D")
    if layout == (2, 2) and ra != MX:
        raise ArgumentError(OP, "recipe_a", "must be BlockWise1x32 for 2Dx2D (ragged K)")
    if a.shape[1] != b.shape[-2]:
        raise ArgumentError(OP, "b", f"inner dimensions must match: a is {tuple(a.shape)}, b is "
                                     f"{tuple(b.shape)}")
    m, k, n = a.shape[0], _k(a), b.shape[-1]
    if ra == MX and k % BLOCK:
        raise ArgumentError(OP, "a", f"K must be a multiple of {BLOCK} for BlockWise1x32, got "
                                     f"K={k}")
    check_tensor(OP, "offs", offs)
    if offs.dtype != torch.int32 or offs.dim() != 1:
        raise ArgumentError(OP, "offs", f"must be a 1-D int32 tensor of cumulative group ends, "
                                        f"got {offs.dtype} of shape {tuple(offs.shape)}")
    if layout == (2, 3):
        g = b.shape[0]
        if offs.shape[0] != g:
            raise ArgumentError(OP, "offs", f"must have one entry per group of b: b has {g} "
                                            f"groups, offs has {offs.shape[0]}")
        rw = ra == ROWWISE
        check_scale(OP, "scale_a", scale_a, ra, (m,) if rw else (m, k // BLOCK),
                    "(M,)" if rw else "(M, K/32)")
        check_scale(OP, "scale_b", scale_b, rb, (g, n) if rw else (g, n, k // BLOCK),
                    "(G, N)" if rw else "(G, N, K/32)")
    else:
        if offs.shape[0] == 0:
            raise ArgumentError(OP, "offs", "must have at least one group for 2Dx2D")
        check_scale(OP, "scale_a", scale_a, ra, (m, k // BLOCK), "(M, K/32)")
        check_scale(OP, "scale_b", scale_b, rb, (n, k // BLOCK), "(N, K/32)")
    check_output_dtype(OP, output_dtype)
    check_same_device(OP, "a", a, b=b, scale_a=scale_a, scale_b=scale_b, offs=offs)


def check_offs_values(a, b, offs, traced: bool = False) -> None:
    """Data rules on offs (``check_group_ends``); 2Dx2D: group starts on 32-element block
    boundaries, so an E8M0 block never straddles two groups."""
    ragged_k = b.dim() == 2
    check_group_ends(OP, offs, _k(a) if ragged_k else a.shape[0],
                     "K" if ragged_k else "rows of a", BLOCK if ragged_k else 0,
                     " under BlockWise1x32 (an E8M0 block may not straddle two groups)",
                     traced=traced)


def _out_shape(a, b, offs):
    if b.dim() == 3:
        return (a.shape[0], b.shape[2])
    return (offs.shape[0], a.shape[0], b.shape[1])


@torch.library.custom_op("xvendor::scaled_grouped_mm", mutates_args=())
def scaled_grouped_mm_op(a: Tensor, b: Tensor, scale_a: Tensor, recipe_a: int, scale_b: Tensor,
                         recipe_b: int, offs: Tensor, swizzle_a: Optional[int] = None,
                         swizzle_b: Optional[int] = None,
                         output_dtype: torch.dtype = torch.bfloat16,
                         backend: Optional[str] = None) -> Tensor:
    args = (a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a, swizzle_b, output_dtype)
    check(*args)
    check_offs_values(a, b, offs)
    return dispatch(a.device, output_dtype, _normalized(*args), backend)


@scaled_grouped_mm_op.register_fake
def _(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a=None, swizzle_b=None,
      output_dtype=torch.bfloat16, backend=None):
    check(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a, swizzle_b, output_dtype)
    traced(OP)
    return a.new_empty(_out_shape(a, b, offs), dtype=output_dtype)


def _normalized(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a, swizzle_b,
                output_dtype):
    return (a, b, scale_a, recipe_id(OP, "recipe_a", recipe_a), scale_b,
            recipe_id(OP, "recipe_b", recipe_b), offs, NO_SWIZZLE, NO_SWIZZLE, output_dtype)


def scaled_grouped_mm(a: Tensor, b: Tensor, scale_a: Tensor, recipe_a, scale_b: Tensor, recipe_b,
                      offs: Tensor, *, swizzle_a=None, swizzle_b=None,
                      output_dtype: torch.dtype = torch.bfloat16,
                      backend: str | None = None) -> Tensor:
    """Grouped scaled FP8/FP4 matmul; see the module docstring."""
    args = (a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a, swizzle_b, output_dtype)
    check(*args)  # our errors, also at trace time
    # Every tensor: one requiring grad must reach the op (no autograd formula, it says so).
    if all(type(t) in _PLAIN and not t.requires_grad for t in (a, b, scale_a, scale_b)) \
            and type(offs) is torch.Tensor and fast_path_open():
        check_offs_values(a, b, offs)
        return dispatch(a.device, output_dtype, _normalized(*args), backend)
    norm = _normalized(*args)
    if not any(t.requires_grad for t in (a, b, scale_a, scale_b)) \
            and (floor := traced_torch(OP, a.device, output_dtype, norm, backend)):
        check_offs_values(a, b, offs, traced=True)  # NOTE [offs in a traced graph]
        return floor(*norm)
    return scaled_grouped_mm_op(*norm[:7], None, None, norm[9], backend)


def shape_class(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a=0, swizzle_b=0,
                output_dtype=torch.bfloat16) -> tuple:
    """The shape class of a (checked, normalized) call: ``xvendor.shapes.grouped_mm_class``'s
    ("2Dx3D:NT" / "2Dx2D:TN"..., M bucket, N, K, group-count bucket, output dtype) with K
    in elements (fp4: twice a's bytes), plus the recipe and element formats
    (``scaled_mm.scaled_inputs``)."""
    form = shapes.GROUPED_FORMS[(a.dim(), b.dim())]
    groups = b.shape[0] if b.dim() == 3 else offs.shape[0]
    return (f"{form}:{shapes.operand_layout(a)}{shapes.operand_layout(b)}",
            shapes.m_bucket(a.shape[0]), b.shape[-1], _k(a), shapes.pow2_bucket(groups),
            str(output_dtype).removeprefix("torch."), scaled_inputs(a, b, recipe_a))


def _oracle(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, *, swizzle_a=None,
            swizzle_b=None, output_dtype=torch.bfloat16):
    return numerics.scaled_grouped_mm(a, b, scale_a, recipe_id(OP, "recipe_a", recipe_a),
                                      scale_b, offs)


def _cases(rand, device):
    from .quantize import quantize
    rw, mx = ScalingType.RowWise, ScalingType.BlockWise1x32
    offs = numerics.random_offs([5, 0, 17, 9], device)  # an empty group; 31 of 33 rows used
    a, sa = quantize(rand(33, 40), E4, "rowwise")
    w, sw = quantize(rand(4, 24, 40), E5, "rowwise")  # (G, N, K) weights, along K
    yield Case("2Dx3D RowWise e4m3 x e5m2, empty group, rows past offs[-1]",
               (a, w.transpose(-2, -1), sa.squeeze(-1), rw, sw.squeeze(-1), rw, offs), {})
    a, sa = quantize(rand(33, 64), FP4, "mx")
    w, sw = quantize(rand(4, 12, 64), FP4, "mx")
    yield Case("2Dx3D MXFP4, fp32 out", (a, w.transpose(-2, -1), sa, mx, sw, mx, offs),
               {"output_dtype": torch.float32})
    a, sa = quantize(rand(6, 160), E4, "mx")
    b, sb = quantize(rand(160, 7), E4, "mx", dim=0)
    koffs = numerics.random_offs([64, 0, 32, 50], device)  # last group ends mid-block
    yield Case("2Dx2D MXFP8 ragged K", (a, b, sa, mx, sb.t(), mx, koffs), {})


SPEC = define(OpSpec(OP, scaled_grouped_mm, check, oracle=_oracle, cases=_cases, error=error,
                     shape_class=shape_class, dispatch_dtype=lambda args: args[-1]))  # output_dtype
