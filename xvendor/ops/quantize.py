"""``xvendor::quantize(x, dtype, recipe, dim=-1, rounding="rceil") -> (data, scale)``.

Quantizes x (float32, float16 or bfloat16; computed in fp32) to FP8 (e4m3fn, e5m2) or FP4
(e2m1) with the scales torch's scaled matrix multiplications take; x ~= data.float() * scale.

- ``"tensorwise"``: one fp32 scale, shape ``()``: amax(|x|) / max_finite(dtype).
- ``"rowwise"``: one fp32 scale per slice along ``dim``, shape x.shape with ``dim`` kept as
  size 1 (a (M, K) operand scaled along K gets (M, 1), as torch's RowWise scaled_mm wants).
  For both: a scale of 0 (amax 0, or an fp32 underflow) becomes 1; data = x / scale divided
  in fp32 (as torch's and torchao's float8 casts do), then rounded to nearest even and
  saturated to +-max_finite. The fp32 quotient can land exactly on a tie the exact quotient
  was not on (x and scale carry 24 bits): then data is one code off the exact x / scale.
  A NaN or inf makes its scale NaN or inf (and data x / scale: NaN, or 0 for finite x).
``recipe`` may also be the ``ScalingType`` member ``scaled_mm`` takes for it
(``TensorWise``, ``RowWise``, ``BlockWise1x32``).

- ``"mx"`` (OCP MX v1.0, BlockWise1x32): 32 consecutive elements along ``dim`` share one
  E8M0 scale X (dtype float8_e8m0fnu: 2^(code - 127), 0xFF = NaN, no zero); x.shape[dim]
  must be a multiple of 32; scale shape x.shape with ``dim`` divided by 32. ``rounding``:
  ``"rceil"`` X = 2^ceil(log2(amax / max_finite)), the fp32 quotient rounded up to a power of
  two exactly (cuBLAS, torchao's MX training path, torch's ``to_mxfp`` test helper);
  ``"floor"`` X = 2^(floor(log2 amax) - emax_elem), emax_elem 8 / 15 / 2 (the OCP text).
  Exponents clamp to [-127, 127]; a block with a NaN gets 0xFF, one with an inf 2^127.
  Elements: V / X rounded to nearest even, saturated. A block whose X is 2^-127 (amax tiny:
  <= max_finite * 2^-127 for rceil) stores zeros, as torch's helper does.
  ``rounding`` only matters for ``"mx"``.

Data: same shape as x in float8_e4m3fn / float8_e5m2; for fp4, dtype float4_e2m1fn_x2 with
x.shape[dim] halved, two elements per byte along ``dim``, the lower index in the low nibble
(torch 2.15 creates and views float4_e2m1fn_x2 but cannot cast to it, so the bytes are built
as uint8 and viewed). e2m1 has no NaN: NaN elements are stored as +0 (their scale is NaN).
Data and scale are contiguous. Not differentiable (no autograd formula: quantization is not
differentiated here; a straight-through estimator belongs to the caller).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor
from torch.nn.functional import ScalingType

from .. import numerics
from ..registry import dispatcher
from ._common import ArgumentError, Case, OpSpec, check_int, check_tensor, define, fast_path_open

OP = "quantize"
dispatch = dispatcher(OP)
_PLAIN = (torch.Tensor, torch.nn.Parameter)
FP4 = torch.float4_e2m1fn_x2
DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2, FP4)
RECIPES = ("tensorwise", "rowwise", "mx")
ROUNDINGS = ("rceil", "floor")
BLOCK = 32
_X_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check(x, dtype, recipe, dim=-1, rounding="rceil") -> None:
    check_tensor(OP, "x", x)
    if x.dtype not in _X_DTYPES:
        # float64 too: the rules are fp32 rules (fp32 quotient and scale).
        raise ArgumentError(OP, "x", f"must be float32, float16 or bfloat16, got {x.dtype}")
    if x.dim() < 1:
        raise ArgumentError(OP, "x", "must have at least 1 dimension, got a 0-D tensor")
    if dtype not in DTYPES:
        raise ArgumentError(OP, "dtype", "must be torch.float8_e4m3fn, torch.float8_e5m2 or "
                                         f"torch.float4_e2m1fn_x2, got {dtype!r}")
    if recipe not in RECIPES:
        raise ArgumentError(OP, "recipe", f"must be one of {RECIPES}, got {recipe!r}")
    check_int(OP, "dim", dim, f"in [-{x.dim()}, {x.dim()})")
    if not -x.dim() <= dim < x.dim():
        raise ArgumentError(OP, "dim", f"must be in [-{x.dim()}, {x.dim()}), got {dim}")
    if rounding not in ROUNDINGS:
        raise ArgumentError(OP, "rounding", f"must be one of {ROUNDINGS}, got {rounding!r}")
    size = x.shape[dim]
    if recipe == "mx" and size % BLOCK:
        raise ArgumentError(OP, "x", f"size along dim {dim} must be a multiple of {BLOCK} for "
                                     f"recipe 'mx' (one E8M0 scale per {BLOCK}), got {size}")
    if dtype == FP4 and size % 2:
        raise ArgumentError(OP, "x", f"size along dim {dim} must be even for fp4 (two "
                                     f"elements per byte along dim), got {size}")


def _shapes(x, dtype, recipe, dim):
    d = dim % x.dim()
    data = list(x.shape)
    if dtype == FP4:
        data[d] //= 2
    if recipe == "tensorwise":
        return data, [], torch.float32
    scale = list(x.shape)
    scale[d] = 1 if recipe == "rowwise" else scale[d] // BLOCK
    return data, scale, torch.float32 if recipe == "rowwise" else torch.float8_e8m0fnu


@torch.library.custom_op("xvendor::quantize", mutates_args=())
def quantize_op(x: Tensor, dtype: torch.dtype, recipe: str, dim: int = -1,
                rounding: str = "rceil", backend: Optional[str] = None) -> tuple[Tensor, Tensor]:
    check(x, dtype, recipe, dim, rounding)
    return dispatch(x.device, x.dtype, (x, dtype, recipe, dim, rounding), backend)


@quantize_op.register_fake
def _(x, dtype, recipe, dim=-1, rounding="rceil", backend=None):
    check(x, dtype, recipe, dim, rounding)
    data, scale, scale_dtype = _shapes(x, dtype, recipe, dim)
    return x.new_empty(data, dtype=dtype), x.new_empty(scale, dtype=scale_dtype)


# The recipes as torch's scaled matmuls name them (one vocabulary: what quantize makes is
# what scaled_mm is told it gets).
_SCALING_NAMES = {ScalingType.TensorWise: "tensorwise", ScalingType.RowWise: "rowwise",
                  ScalingType.BlockWise1x32: "mx"}


def recipe_name(recipe):
    """``recipe`` as quantize's string: a ``ScalingType`` member it makes, or the string."""
    if isinstance(recipe, ScalingType):
        if recipe not in _SCALING_NAMES:
            raise ArgumentError(OP, "recipe", f"must be one of {RECIPES} or ScalingType."
                                f"{{TensorWise, RowWise, BlockWise1x32}}, got {recipe}")
        return _SCALING_NAMES[recipe]
    return recipe


def quantize(x: Tensor, dtype: torch.dtype, recipe, *, dim: int = -1,
             rounding: str = "rceil", backend: str | None = None) -> tuple[Tensor, Tensor]:
    """FP8/FP4 data and its scales; see the module docstring. ``recipe``: "tensorwise",
    "rowwise", "mx", or the ``ScalingType`` member scaled_mm takes for it."""
    recipe = recipe_name(recipe)
    check(x, dtype, recipe, dim, rounding)  # our errors, also at trace time
    if type(x) in _PLAIN and not x.requires_grad and fast_path_open():
        return dispatch(x.device, x.dtype, (x, dtype, recipe, dim, rounding), backend)
    return quantize_op(x, dtype, recipe, dim, rounding, backend)


def _bound(x, dtype, recipe, s):
    """Per-element bound on |data * scale - x| (``s``: the scale per element, fp64): half a
    step of the format (relative in its normal range, absolute in its subnormal one), plus
    what saturation or the 2^-127 flush of MX may lose."""
    ebits, mbits, max_pos, _ = numerics.QFORMATS[dtype]
    xd = x.double()
    half_sub = 2.0 ** (2 - 2 ** (ebits - 1) - mbits - 1)
    bound = xd.abs() * 2.0 ** -(mbits + 1) + half_sub * s + (xd.abs() - max_pos * s).clamp(min=0)
    if recipe == "mx":
        bound = torch.where(s == 2.0 ** -127, bound + xd.abs(), bound)
    return bound + xd.abs() * 2.0 ** -23  # the fp32 quotient's own rounding (non-MX)


def _expand_scale(scale, recipe, dim, x):
    """The scale of each element of x, fp64 (E8M0 decoded from its bits)."""
    if recipe == "mx":
        s = numerics.e8m0_value(scale.view(torch.uint8))
        return s.repeat_interleave(BLOCK, dim=dim % x.dim())
    return scale.double().expand(x.shape)


def error(out, expected, args, kwargs) -> float:
    """0 when data and scale have the op's dtypes and shapes, are bit-equal to the oracle,
    and data * scale is within the format's half step of x (where x and the scale are
    finite); else at least 1 (inf for a dtype, shape or bit mismatch)."""
    x, dtype, recipe = args[:3]
    dim = kwargs.get("dim", -1)
    data, scale = out
    want_data, want_scale, scale_dtype = _shapes(x, dtype, recipe, dim)
    if (data.dtype, list(data.shape), scale.dtype, list(scale.shape)) != \
            (dtype, want_data, scale_dtype, want_scale):
        return float("inf")
    codes, exp_codes = numerics.element_codes(data, dim).long(), expected[0]
    if dtype != FP4:  # NaN codes differ in sign/payload between formats: compare NaN-ness
        nan = torch.isnan(numerics.decode(codes, dtype))
        codes = torch.where(nan, -1, codes)
    got_scale = scale.view(torch.uint8).long() if recipe == "mx" else scale.double()
    same_scale = (got_scale == expected[1]) | (got_scale.isnan() & expected[1].isnan())
    if codes.shape != exp_codes.shape or not torch.equal(codes, exp_codes) \
            or not bool(same_scale.all()):
        return float("inf")
    s = _expand_scale(scale, recipe, dim, x)
    ok = torch.isfinite(x) & torch.isfinite(s)
    err = torch.where(ok, (numerics.decode(codes, dtype) * s - x.double()).abs(), 0.0)
    bound = torch.where(ok, _bound(x, dtype, recipe, s), 1.0)
    worst = (err / bound).max().item() if err.numel() else 0.0
    return 0.0 if worst <= 1 else worst


def _cases(rand, device):
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    yield Case("mx e4m3 rceil 4x64", (rand(4, 64) * 100, e4, "mx"), {})
    yield Case("mx e5m2 floor along dim 0", (rand(64, 3), e5, "mx"), {"dim": 0, "rounding": "floor"})
    yield Case("mx fp4 rceil 3-D", (rand(2, 3, 96), FP4, "mx"), {})
    yield Case("mx fp4 floor, saturating", (rand(5, 32), FP4, "mx"), {"rounding": "floor"})
    yield Case("rowwise e4m3 5x40", (rand(5, 40), e4, "rowwise"), {})
    yield Case("rowwise fp4 along dim 0", (rand(6, 7), FP4, "rowwise"), {"dim": 0})
    yield Case("tensorwise e5m2 3-D", (rand(2, 3, 9) * 1e3, e5, "tensorwise"), {})


SPEC = define(OpSpec(OP, quantize, check, oracle=numerics.quantize, cases=_cases, error=error))
