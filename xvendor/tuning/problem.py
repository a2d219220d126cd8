"""The tuning problem key: what a tuned winner is valid for.

NOTE [problem key v1]: (op, backend, exact arch, CU count, product, input dtype, output
dtype, operand layout, shape bucket). A winner measured on one chip is never served for
another: gfx1250 and gfx1251 differ up to 4x in matrix-instruction latency, so the key
holds the exact arch and CU count, not the family.

Shape buckets and operand layouts are the op's shape class (NOTE [shape buckets] in
``xvendor.shapes``, the one owner of both). Bump ``KEY_VERSION`` when any of this changes:
files of another version are ignored.

NOTE [scaled problem keys]: for ``scaled_mm`` / ``scaled_grouped_mm`` the ``dtype`` field
is what the call multiplies: the recipe and both operands' element formats,
``"<recipe>:<a>x<b>"`` with recipe ``tensorwise | rowwise | mx`` (BlockWise1x32) and
formats ``e4m3 | e5m2 | e2m1`` (e.g. ``"mx:e2m1xe2m1"``, ``"rowwise:e4m3xe5m2"``);
``out_dtype`` is the output dtype and K counts elements (an fp4 operand holds K/2 bytes).
The op's shape class carries that string as its seventh element (``xvendor.ops.scaled_mm.
shape_class``). The field keeps its place, so keys of the other ops are unchanged (no
version bump); a scaled key never equals a bf16 one, and MXFP8 never equals MXFP4 or
RowWise: a config tuned for one recipe or format is never served to another.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .. import shapes

KEY_VERSION = 1
SCALED_OPS = ("scaled_mm", "scaled_grouped_mm")
RECIPES = ("tensorwise", "rowwise", "mx")
FORMATS = ("e4m3", "e5m2", "e2m1")


def _scaled_class(op):
    def shape_class(*args):
        # Imported on first use: the op module (layer 3) owns its shape class; the tuning
        # layer need not load torch.library ops to parse or print a key.
        from importlib import import_module
        return import_module(f"xvendor.ops.{op}").shape_class(*args)
    return shape_class


# What each tuned op's shape class is computed with (the ops use the same functions).
SHAPE_CLASS = {"gemm": shapes.gemm_class, "grouped_mm": shapes.grouped_mm_class,
               "rms_norm": shapes.rms_norm_class,
               "rms_norm_backward": shapes.rms_norm_backward_class, "topk": shapes.topk_class,
               **{op: _scaled_class(op) for op in SCALED_OPS}}


def scaled_inputs(dtype_field: str) -> tuple[str, str, str] | None:
    """(recipe, format of a, format of b) of a scaled key's ``dtype`` field, else None."""
    recipe, sep, formats = dtype_field.partition(":")
    fa, x, fb = formats.partition("x")
    if not sep or not x or recipe not in RECIPES or fa not in FORMATS or fb not in FORMATS:
        return None
    return recipe, fa, fb


@dataclass(frozen=True)
class ProblemKey:
    op: str
    backend: str
    arch: str
    cus: int
    product: str
    dtype: str
    out_dtype: str
    layout: str  # e.g. "NT" for gemm (a row-major, b transposed); "2Dx3D:NT" for grouped_mm
    m: int  # bucketed
    n: int
    k: int
    groups: int = 0  # bucketed; 0 for gemm
    version: int = KEY_VERSION

    @property
    def scaled(self) -> tuple[str, str, str] | None:
        """(recipe, format of a, format of b) for a scaled op (NOTE [scaled problem keys])."""
        return scaled_inputs(self.dtype) if self.op in SCALED_OPS else None

    def __str__(self) -> str:
        return "|".join(str(v) for v in asdict(self).values())

    @classmethod
    def parse(cls, text: str) -> "ProblemKey":
        fields = text.split("|")
        if len(fields) != 13:
            raise ValueError(f"not a v{KEY_VERSION} problem key: {text!r}")
        op, backend, arch, cus, product, dtype, out_dtype, layout, m, n, k, g, v = fields
        return cls(op, backend, arch, int(cus), product, dtype, out_dtype, layout, int(m),
                   int(n), int(k), int(g), int(v))


def from_shape_class(op: str, backend: str, arch: str, cus: int, product: str, dtype,
                     shape_class: tuple) -> ProblemKey:
    """The key of an op's shape class (``xvendor.ops.<op>.shape_class``); a scaled op's
    seventh element (recipe and formats) replaces ``dtype``, its decision (output) dtype."""
    layout, m, n, k, groups, out_dtype, *inputs = shape_class
    dtype = inputs[0] if inputs else str(dtype).removeprefix("torch.")
    return ProblemKey(op, backend, arch, cus, product, dtype, out_dtype, layout, m, n, k,
                      groups)


def key_for(op: str, backend: str, arch: str, cus: int, product: str, args: tuple) -> ProblemKey:
    """The key of one call's arguments (as the ops pass them to kernels)."""
    if op not in SHAPE_CLASS:
        raise ValueError(f"tuning: op {op!r} has no problem key (tuned ops: "
                         f"{', '.join(SHAPE_CLASS)})")
    return from_shape_class(op, backend, arch, cus, product, args[0].dtype,
                            SHAPE_CLASS[op](*args))
