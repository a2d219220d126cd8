"""The tuning problem key: what a tuned winner is valid for.

NOTE [problem key v1]: (op, backend, exact arch, CU count, product, input dtype, output
dtype, operand layout, shape bucket). A winner measured on one chip is never served for
another: gfx1250 and gfx1251 differ up to 4x in matrix-instruction latency, so the key
holds the exact arch and CU count, not the family.

Shape buckets: M rounds up to a power of two up to 256, then to a multiple of 256 (the
token count of a step varies; tile choice barely changes within a bucket); N and K are
exact (they are model dimensions); the group count of grouped_mm rounds up to a power of
two. Operand layout is "N" (row-major, unit stride on the last dim) or "T" per operand.
Bump ``KEY_VERSION`` when any of this changes: files of another version are ignored.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

KEY_VERSION = 1


def bucket_m(m: int) -> int:
    if m <= 0:
        return 0
    if m <= 256:
        return 1 << (m - 1).bit_length()
    return -(-m // 256) * 256


def bucket_groups(g: int) -> int:
    return 1 << (g - 1).bit_length() if g > 0 else 0


def operand_layout(t) -> str:
    """"N" when the last dimension is contiguous, else "T" (a transposed view)."""
    return "N" if t.dim() == 0 or t.stride(-1) == 1 else "T"


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


def _dt(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def key_for(op: str, backend: str, arch: str, cus: int, product: str, args: tuple) -> ProblemKey:
    """The key of one call's arguments (as the ops pass them to kernels)."""
    if op == "gemm":
        a, b, _bias, out_dtype = args
        return ProblemKey(op, backend, arch, cus, product, _dt(a.dtype),
                          _dt(out_dtype or a.dtype), operand_layout(a) + operand_layout(b),
                          bucket_m(a.shape[0]), b.shape[1], a.shape[1])
    if op == "grouped_mm":
        a, b, offs, _bias, out_dtype = args
        form = f"{a.dim()}Dx{b.dim()}D"
        groups = offs.shape[0] if offs is not None else a.shape[0]
        m = a.shape[-2] if a.dim() == 2 else a.shape[1]
        return ProblemKey(op, backend, arch, cus, product, _dt(a.dtype),
                          _dt(out_dtype or a.dtype),
                          f"{form}:{operand_layout(a)}{operand_layout(b)}",
                          bucket_m(m), b.shape[-1], a.shape[-1], bucket_groups(groups))
    raise ValueError(f"tuning: op {op!r} has no problem key (tuned ops: gemm, grouped_mm)")
