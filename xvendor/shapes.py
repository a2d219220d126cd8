"""Shape classes: what a tuned winner is keyed on, computed the same way by ops and tuning.

A leaf module (it imports nothing from xvendor): the ops compute a call's shape class on
the hot path when a tuning table is present, and ``xvendor.tuning.problem`` turns the same
tuple into a problem key, so both must agree by construction.

NOTE [shape buckets]: M rounds up to a power of two up to 256, then to a multiple of 256
(the token count of a step varies; tile choice barely changes within a bucket); N and K
are exact (model dimensions); the group count rounds up to a power of two. Operand layout
is "N" (unit stride on the last dimension) or "T" (a transposed view) per operand. A
shape class is ``(layout, m, n, k, groups, out_dtype)``; grouped layouts are written
``"2Dx3D:NT"`` (form, then the operand layouts).
"""

from __future__ import annotations

__all__ = ["GROUPED_FORMS", "pow2_bucket", "m_bucket", "operand_layout", "grouped_sizes",
           "gemm_class", "grouped_mm_class"]

# The four forms of torch._grouped_mm, by (a.dim(), b.dim()), and what offs runs along.
GROUPED_FORMS = {(2, 3): "2Dx3D", (3, 2): "3Dx2D", (2, 2): "2Dx2D", (3, 3): "3Dx3D"}


def pow2_bucket(n: int) -> int:
    """``n`` rounded up to a power of two (0 stays 0): the bucket for group counts."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def m_bucket(m: int) -> int:
    """M of a shape class: a power of two up to 256, then a multiple of 256."""
    return pow2_bucket(m) if m <= 256 else -(-m // 256) * 256


def operand_layout(t) -> str:
    """"N" when the last dimension is contiguous, else "T" (a transposed view)."""
    return "N" if t.dim() == 0 or t.stride(-1) == 1 else "T"


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def grouped_sizes(a, b, offs) -> tuple:
    """(groups, ragged extent, out shape, bias shape, bias rule) of a grouped_mm call.

    2Dx3D is ragged along the rows of a, 3Dx2D along the columns of b, 2Dx2D along K;
    3Dx3D is batched (no offs).
    """
    form = (a.dim(), b.dim())
    if form == (2, 3):
        return b.shape[0], a.shape[0], (a.shape[0], b.shape[2]), (b.shape[0], b.shape[2]), "(G, N)"
    if form == (3, 2):
        return a.shape[0], b.shape[1], (a.shape[1], b.shape[1]), (b.shape[1],), "(N,)"
    g = offs.shape[0] if form == (2, 2) else a.shape[0]
    return g, a.shape[-1], (g, a.shape[-2], b.shape[-1]), (g, b.shape[-1]), "(G, N)"


def gemm_class(a, b, bias=None, out_dtype=None) -> tuple:
    """The shape class of ``gemm(a, b, bias, out_dtype)``."""
    return (operand_layout(a) + operand_layout(b), m_bucket(a.shape[0]), b.shape[1],
            a.shape[1], 0, _dtype_name(out_dtype or a.dtype))


def rows_class(x, n: int, k: int = 0) -> tuple:
    """The shape class of a row-wise op over rows of ``n`` elements (``k``: topk's k)."""
    rows = x.numel() // n if n else 0
    return ("rows", m_bucket(rows), n, k, 0, _dtype_name(x.dtype))


def rms_norm_class(x, weight=None, eps=None) -> tuple:
    return rows_class(x, x.shape[-1] if x.dim() else 1)


def rms_norm_backward_class(grad, x, weight=None, eps=None) -> tuple:
    return rms_norm_class(x)


def topk_class(x, k, dim=-1, largest=True, sorted=True) -> tuple:
    return rows_class(x, x.shape[dim] if x.dim() else 1, k)


def grouped_mm_class(a, b, offs=None, bias=None, out_dtype=None) -> tuple:
    """The shape class of ``grouped_mm(a, b, offs, bias, out_dtype)``."""
    groups = grouped_sizes(a, b, offs)[0]
    layout = f"{GROUPED_FORMS[(a.dim(), b.dim())]}:{operand_layout(a)}{operand_layout(b)}"
    return (layout, m_bucket(a.shape[-2]), b.shape[-1], a.shape[-1], pow2_bucket(groups),
            _dtype_name(out_dtype or a.dtype))
