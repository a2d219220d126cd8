"""``xvendor::scaled_mm``: out = dequant(a) @ dequant(b) (+ bias), torch.nn.functional.scaled_mm.

    xvendor.scaled_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, *, swizzle_a=None,
                      swizzle_b=None, bias=None, output_dtype=torch.bfloat16, backend=None)

Operands (the outputs of ``xvendor.quantize``):

- fp8: a (M, K), b (K, N) of float8_e4m3fn / float8_e5m2. Mixed e4m3 x e5m2 and e5m2 x
  e4m3 are accepted; e5m2 x e5m2 is refused (torch's CUDA kernel refuses it too, its CPU
  kernel accepts it: we keep the stricter rule so a program valid here is valid on a GPU).
- fp4 (float4_e2m1fn_x2, two elements per byte along K, the lower K index in the low
  nibble): a is (M, K/2), b is (K/2, N), both packed along K, i.e. b's bytes pair rows
  2i and 2i+1 of the logical (K, N) matrix. This is torch's own layout: its MXFP4 tests
  quantize the (N, K) weight along K to (N, K/2) and pass its transpose, a (K/2, N) view.
  ``xvendor.quantize(b, FP4, "mx", dim=0)`` on a (K, N) b gives the same bytes. fp4 only
  with fp4 and only under BlockWise1x32 (MXFP4); never mixed with fp8.

Recipes (``torch.nn.functional.ScalingType``, or its int value, which the op schema
carries), accepted only in these pairs (torch's scaled_mm takes these, and more on CUDA:
1x128/128x128 blocks, NVFP4's 1x16, which are refused here):

    recipe_a / recipe_b            scale_a              scale_b
    TensorWise / TensorWise        fp32, 1 element      fp32, 1 element  (shape (), (1,), (1, 1))
    RowWise / RowWise              fp32 (M, 1)          fp32 (1, N)
    BlockWise1x32 / BlockWise1x32  e8m0fnu (M, K/32)    e8m0fnu (N, K/32)   K % 32 == 0

MX scales: scale_a[m, j] multiplies a[m, 32j:32j+32], scale_b[n, j] multiplies
b[32j:32j+32, n] (torch's (N, K/32) orientation: ``quantize(b, ..., "mx", dim=0)`` returns
(K/32, N), pass its ``.t()``). Swizzles: only ``SwizzleType.NO_SWIZZLE`` (or None); the
swizzled layouts of CUDA's block-scaled kernels are refused. ``bias``: (N,), dtype
output_dtype or float32. ``output_dtype``: bfloat16 (default), float16 or float32 (torch
also allows fp8 outputs under TensorWise; we do not).

Semantics (the ``reference`` kernel): each operand dequantized in fp32 (data times its broadcast
scale; MX: each 32-block along K times its E8M0 scale), an fp32 matmul, + bias in fp32,
one rounding to output_dtype.

Any strides for every tensor. torch's meta function for ``_scaled_mm`` refuses a row-major
b (and sizes not multiples of 16) that its CPU kernel accepts; ours follows the reference,
which dequantizes anyway, so the fake implementation accepts exactly what the eager op
accepts and eager and traced programs agree. A GPU backend that needs column-major b
copies it.

Not differentiable (no autograd formula): FP8/MX training quantizes with the caller's
recipe (``xvendor.quantize``) and calls scaled_mm for each of its GEMMs itself.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor
from torch.nn.functional import ScalingType, SwizzleType

from .. import numerics, shapes
from ..registry import dispatcher
from ._common import (ArgumentError, Case, OpSpec, check_same_device, check_tensor, define,
                      fast_path_open, traced_torch, traced)

OP = "scaled_mm"
dispatch = dispatcher(OP)
_PLAIN = (torch.Tensor, torch.nn.Parameter)
E4, E5, FP4 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float4_e2m1fn_x2
E8M0 = torch.float8_e8m0fnu
BLOCK = 32
TENSORWISE, ROWWISE, MX = (ScalingType.TensorWise.value, ScalingType.RowWise.value,
                           ScalingType.BlockWise1x32.value)
_RECIPE_NAMES = {TENSORWISE: "TensorWise", ROWWISE: "RowWise", MX: "BlockWise1x32"}
_ALL_RECIPES = {t.value: name for name, t in ScalingType.__members__.items()}
NO_SWIZZLE = SwizzleType.NO_SWIZZLE.value
OUTPUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def recipe_id(op: str, name: str, recipe) -> int:
    """ScalingType or its int value -> the int; anything else is an ArgumentError."""
    if isinstance(recipe, ScalingType):
        return recipe.value
    if isinstance(recipe, int) and not isinstance(recipe, bool) and recipe in _ALL_RECIPES:
        return recipe
    raise ArgumentError(op, name, f"must be a torch.nn.functional.ScalingType, got {recipe!r}")


def swizzle_id(op: str, name: str, swizzle) -> int:
    """None or SwizzleType.NO_SWIZZLE (or 0) -> 0; every other swizzle is refused."""
    if swizzle is None:
        return NO_SWIZZLE
    value = swizzle.value if isinstance(swizzle, SwizzleType) else swizzle
    if isinstance(value, int) and not isinstance(value, bool) and value == NO_SWIZZLE:
        return NO_SWIZZLE
    raise ArgumentError(op, name, f"must be None or SwizzleType.NO_SWIZZLE (scales are plain "
                                  f"row-major blocks here), got {swizzle!r}")


def check_operand_dtypes(op: str, a, b, ra: int, rb: int) -> None:
    """dtype and recipe pairing rules shared by scaled_mm and scaled_grouped_mm."""
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in (E4, E5, FP4):
            raise ArgumentError(op, name, f"must be float8_e4m3fn, float8_e5m2 or "
                                          f"float4_e2m1fn_x2, got {t.dtype}")
    if (a.dtype == FP4) != (b.dtype == FP4):
        raise ArgumentError(op, "b", f"fp4 multiplies only fp4 (MXFP4): a is {a.dtype}, "
                                     f"b is {b.dtype}")
    if a.dtype == E5 and b.dtype == E5:
        raise ArgumentError(op, "b", "float8_e5m2 x float8_e5m2 is not supported (as on "
                                     "torch's CUDA kernels): make one operand float8_e4m3fn")
    if ra != rb or ra not in _RECIPE_NAMES:
        raise ArgumentError(op, "recipe_b", f"recipes must be TensorWise/TensorWise, RowWise/"
                                            f"RowWise or BlockWise1x32/BlockWise1x32, got "
                                            f"{_ALL_RECIPES[ra]}/{_ALL_RECIPES[rb]}")
    if a.dtype == FP4 and ra != MX:
        raise ArgumentError(op, "recipe_a", f"fp4 operands need BlockWise1x32 (MXFP4), got "
                                            f"{_ALL_RECIPES[ra]}")


def check_scale(op: str, name: str, scale, recipe: int, shape: tuple, rule: str) -> None:
    """dtype and shape of one scale; ``shape``/``rule`` are the RowWise/MX expectation."""
    check_tensor(op, name, scale)
    want = E8M0 if recipe == MX else torch.float32
    if scale.dtype != want:
        raise ArgumentError(op, name, f"must be {want} for {_RECIPE_NAMES[recipe]}, got "
                                      f"{scale.dtype}")
    if recipe == TENSORWISE:
        if scale.numel() != 1 or scale.dim() > 2:
            raise ArgumentError(op, name, f"must hold one element for TensorWise (shape (), "
                                          f"(1,) or (1, 1)), got shape {tuple(scale.shape)}")
    elif tuple(scale.shape) != tuple(shape):
        raise ArgumentError(op, name, f"must have shape {rule} = {tuple(shape)} for "
                                      f"{_RECIPE_NAMES[recipe]}, got {tuple(scale.shape)}")


def check_output_dtype(op: str, output_dtype) -> None:
    if not isinstance(output_dtype, torch.dtype) or output_dtype not in OUTPUT_DTYPES:
        raise ArgumentError(op, "output_dtype", f"must be torch.bfloat16, torch.float16 or "
                                                f"torch.float32, got {output_dtype!r}")


def check(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a=None, swizzle_b=None,
          bias=None, output_dtype=torch.bfloat16) -> tuple:
    """Metadata rules (no data reads; the fake implementation runs these too); the two
    recipes as ints."""
    check_tensor(OP, "a", a)
    check_tensor(OP, "b", b)
    ra, rb = recipe_id(OP, "recipe_a", recipe_a), recipe_id(OP, "recipe_b", recipe_b)
    swizzle_id(OP, "swizzle_a", swizzle_a)
    swizzle_id(OP, "swizzle_b", swizzle_b)
    if a.dim() != 2:
        raise ArgumentError(OP, "a", f"must be 2-D (M, K), got shape {tuple(a.shape)}")
    if b.dim() != 2:
        raise ArgumentError(OP, "b", f"must be 2-D (K, N), got shape {tuple(b.shape)}")
    check_operand_dtypes(OP, a, b, ra, rb)
    if a.shape[1] != b.shape[0]:
        packed = " (fp4: K/2 bytes each, packed along K)" if a.dtype == FP4 else ""
        raise ArgumentError(OP, "b", f"inner dimensions must match{packed}: a is "
                                     f"{tuple(a.shape)}, b is {tuple(b.shape)}")
    m, n = a.shape[0], b.shape[1]
    k = a.shape[1] * (2 if a.dtype == FP4 else 1)
    if ra == MX and k % BLOCK:
        raise ArgumentError(OP, "a", f"K must be a multiple of {BLOCK} for BlockWise1x32 (one "
                                     f"E8M0 scale per {BLOCK} elements along K), got K={k}")
    check_scale(OP, "scale_a", scale_a, ra, (m, 1) if ra == ROWWISE else (m, k // BLOCK),
                "(M, 1)" if ra == ROWWISE else "(M, K/32)")
    check_scale(OP, "scale_b", scale_b, rb, (1, n) if rb == ROWWISE else (n, k // BLOCK),
                "(1, N)" if rb == ROWWISE else "(N, K/32)")
    check_output_dtype(OP, output_dtype)
    if bias is not None:
        check_tensor(OP, "bias", bias)
        if tuple(bias.shape) != (n,):
            raise ArgumentError(OP, "bias", f"must have shape (N,) = ({n},), got "
                                            f"{tuple(bias.shape)}")
        if bias.dtype not in (output_dtype, torch.float32):
            raise ArgumentError(OP, "bias", f"dtype must be output_dtype ({output_dtype}) or "
                                            f"torch.float32, got {bias.dtype}")
    check_same_device(OP, "a", a, b=b, scale_a=scale_a, scale_b=scale_b, bias=bias)
    return ra, rb


@torch.library.custom_op("xvendor::scaled_mm", mutates_args=())
def scaled_mm_op(a: Tensor, b: Tensor, scale_a: Tensor, recipe_a: int, scale_b: Tensor,
                 recipe_b: int, swizzle_a: Optional[int] = None, swizzle_b: Optional[int] = None,
                 bias: Optional[Tensor] = None, output_dtype: torch.dtype = torch.bfloat16,
                 backend: Optional[str] = None) -> Tensor:
    args = (a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a, swizzle_b, bias, output_dtype)
    check(*args)
    return dispatch(a.device, output_dtype, _normalized(*args), backend)


@scaled_mm_op.register_fake
def _(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a=None, swizzle_b=None, bias=None,
      output_dtype=torch.bfloat16, backend=None):
    check(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a, swizzle_b, bias, output_dtype)
    traced(OP)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=output_dtype)


def _normalized(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a, swizzle_b, bias,
                output_dtype):
    """The kernels' arguments: recipes and swizzles as ints (the schema's form), so the
    fast path and the dispatcher path hand kernels the same thing."""
    return (a, b, scale_a, recipe_id(OP, "recipe_a", recipe_a), scale_b,
            recipe_id(OP, "recipe_b", recipe_b), NO_SWIZZLE, NO_SWIZZLE, bias, output_dtype)


def scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, recipe_a, scale_b: Tensor, recipe_b, *,
              swizzle_a=None, swizzle_b=None, bias: Tensor | None = None,
              output_dtype: torch.dtype = torch.bfloat16, backend: str | None = None) -> Tensor:
    """Scaled FP8/FP4 matmul; see the module docstring."""
    ra, rb = check(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a, swizzle_b, bias,
                   output_dtype)  # our errors, also at trace time
    # the kernels' arguments: recipes and swizzles as ints (the schema's form)
    norm = (a, b, scale_a, ra, scale_b, rb, NO_SWIZZLE, NO_SWIZZLE, bias, output_dtype)
    # Every tensor argument, bias and the fp32 scales included: one requiring grad must
    # reach the op, which has no autograd formula and says so, rather than a kernel that
    # torch's autograd would silently differentiate through.
    # (spelled out: a generator over the four costs ~1.5 us a call here)
    if type(a) in _PLAIN and type(b) in _PLAIN and type(scale_a) in _PLAIN \
            and type(scale_b) in _PLAIN and not (a.requires_grad or b.requires_grad or
                                                 scale_a.requires_grad or scale_b.requires_grad) \
            and (bias is None or (type(bias) in _PLAIN and not bias.requires_grad)) \
            and fast_path_open():
        return dispatch(a.device, output_dtype, norm, backend)
    if not any(t is not None and t.requires_grad for t in (a, b, scale_a, scale_b, bias)) \
            and (floor := traced_torch(OP, a.device, output_dtype, norm, backend)):
        return floor(*norm)
    return scaled_mm_op(*norm[:6], None, None, *norm[8:], backend)


_FORMATS = {E4: "e4m3", E5: "e5m2", FP4: "e2m1"}
_RECIPE_KEYS = {TENSORWISE: "tensorwise", ROWWISE: "rowwise", MX: "mx"}


def scaled_inputs(a, b, recipe: int) -> str:
    """What a scaled call multiplies, as a tuned winner is keyed on it: the recipe and each
    operand's element format, e.g. ``"mx:e2m1xe4m3"`` or ``"rowwise:e4m3xe5m2"``."""
    return f"{_RECIPE_KEYS[recipe]}:{_FORMATS[a.dtype]}x{_FORMATS[b.dtype]}"


def shape_class(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a=0, swizzle_b=0,
                bias=None, output_dtype=torch.bfloat16) -> tuple:
    """The shape class of a (checked, normalized) call: ``xvendor.shapes.gemm_class``'s
    (layout, M bucket, N, K, 0, output dtype) with K in elements (fp4: twice a's bytes),
    plus ``scaled_inputs``: a winner tuned for MXFP8 is never served to MXFP4 or RowWise."""
    return (shapes.operand_layout(a) + shapes.operand_layout(b), shapes.m_bucket(a.shape[0]),
            b.shape[1], a.shape[1] * (2 if a.dtype == FP4 else 1), 0,
            str(output_dtype).removeprefix("torch."), scaled_inputs(a, b, recipe_a))


def error(out, expected, args, kwargs) -> float:
    """0 when ``out`` has output_dtype, shape (M, N) and a normwise error against the fp64
    oracle within ``numerics.TOLERANCE[output_dtype]``; else error / tolerance (> 1), inf
    for a dtype or shape mismatch. Normalized because ``xvendor check`` compares with the
    tolerance of the input dtype under test, not of output_dtype."""
    output_dtype = kwargs.get("output_dtype", torch.bfloat16)
    if not isinstance(out, torch.Tensor) or out.dtype != output_dtype \
            or tuple(out.shape) != tuple(expected.shape):
        return float("inf")
    ratio = numerics.rel_error(out, expected) / numerics.TOLERANCE[output_dtype]
    return 0.0 if ratio <= 1 else ratio


def _oracle(a, b, scale_a, recipe_a, scale_b, recipe_b, *, swizzle_a=None, swizzle_b=None,
            bias=None, output_dtype=torch.bfloat16):
    return numerics.scaled_mm(a, b, scale_a, recipe_id(OP, "recipe_a", recipe_a), scale_b,
                              recipe_id(OP, "recipe_b", recipe_b), bias)


def _cases(rand, device):
    from .quantize import quantize
    tw, rw, mx = ScalingType.TensorWise, ScalingType.RowWise, ScalingType.BlockWise1x32

    # b as torch wants it: quantize the (N, K) weight along K, pass the (K, N) transpose.
    a, sa = quantize(rand(7, 48) * 3, E4, "tensorwise")
    w, sw = quantize(rand(9, 48), E4, "tensorwise")
    yield Case("TensorWise e4m3, column-major b, fp32 out", (a, w.t(), sa, tw, sw, tw),
               {"output_dtype": torch.float32})
    a, sa = quantize(rand(5, 40), E4, "rowwise")
    b, sb = quantize(rand(40, 11), E5, "rowwise", dim=0)
    yield Case("RowWise e4m3 x e5m2, row-major b, +bias bf16", (a, b, sa, rw, sb, rw),
               {"bias": rand(11).bfloat16()})
    a, sa = quantize(rand(3, 64) * 10, E4, "mx")
    b, sb = quantize(rand(64, 13), E4, "mx", dim=0)
    yield Case("MXFP8 e4m3, fp16 out, +bias fp32", (a, b, sa, mx, sb.t(), mx),
               {"output_dtype": torch.float16, "bias": rand(13).float()})
    a, sa = quantize(rand(5, 96), FP4, "mx")
    w, sw = quantize(rand(7, 96), FP4, "mx")
    yield Case("MXFP4, b packed along K (weight transpose)", (a, w.t(), sa, mx, sw, mx), {})


SPEC = define(OpSpec(OP, scaled_mm, check, oracle=_oracle, cases=_cases, error=error,
                     shape_class=shape_class,
                     dispatch_dtype=lambda args: args[-1]))  # output_dtype
