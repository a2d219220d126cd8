"""The tuning problem key: what a tuned winner is valid for.

NOTE [problem key v1]: (op, backend, exact arch, CU count, product, input dtype, output
dtype, operand layout, shape bucket). A winner measured on one chip is never served for
another: gfx1250 and gfx1251 differ up to 4x in matrix-instruction latency, so the key
holds the exact arch and CU count, not the family.

Shape buckets and operand layouts are the op's shape class (NOTE [shape buckets] in
``xvendor.shapes``, the one owner of both). Bump ``KEY_VERSION`` when any of this changes:
files of another version are ignored.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .. import shapes

KEY_VERSION = 1
# What each tuned op's shape class is computed with (the ops use the same functions).
SHAPE_CLASS = {"gemm": shapes.gemm_class, "grouped_mm": shapes.grouped_mm_class}


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
    """The key of an op's shape class (``xvendor.ops.<op>.shape_class``)."""
    layout, m, n, k, groups, out_dtype = shape_class
    return ProblemKey(op, backend, arch, cus, product, str(dtype).removeprefix("torch."),
                      out_dtype, layout, m, n, k, groups)


def key_for(op: str, backend: str, arch: str, cus: int, product: str, args: tuple) -> ProblemKey:
    """The key of one call's arguments (as the ops pass them to kernels)."""
    if op not in SHAPE_CLASS:
        raise ValueError(f"tuning: op {op!r} has no problem key (tuned ops: "
                         f"{', '.join(SHAPE_CLASS)})")
    return from_shape_class(op, backend, arch, cus, product, args[0].dtype,
                            SHAPE_CLASS[op](*args))
