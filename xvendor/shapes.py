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

from typing import NamedTuple

from torch.compiler import is_compiling as _compiling

__all__ = ["GROUPED_FORMS", "GroupedProblem", "pow2_bucket", "m_bucket", "operand_layout",
           "grouped_problem", "gemm_class", "grouped_mm_class", "note_last_end", "last_end"]

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


class GroupedProblem(NamedTuple):
    """One grouped_mm call's problem, worked out once from the operands' shapes (frozen).

    ``m``, ``n``: the rows and columns of each group's output (2Dx3D: all rows of ``a``,
    shared by the groups through ``offs``; 3Dx2D: all columns of ``b``); ``k`` the
    contraction; ``ragged`` the dimension ``offs`` splits ("m", "n", "k"; None for the
    batched 3Dx3D) and ``extent`` its length, the bound on ``offs[-1]``.
    """

    form: str            # "2Dx3D", "3Dx2D", "2Dx2D", "3Dx3D" (GROUPED_FORMS)
    groups: int
    m: int
    n: int
    k: int
    ragged: str | None
    extent: int
    out_shape: tuple
    bias_shape: tuple
    bias_rule: str


_PROBLEMS: dict = {}


def grouped_problem(a, b, offs) -> GroupedProblem:
    """The ``GroupedProblem`` of ``grouped_mm(a, b, offs, ...)`` (2-D/3-D operands whose
    inner dimensions the op has checked). Kept per shape triple: a training step asks for
    the same few problems on every call, from the op's checks, its fake, the shape class,
    the gate and the backend's launch, and each gets the same record."""
    if _compiling():  # traced: no cache (Dynamo would guard on its contents)
        return _work_out(a, b, offs)
    key = (a.shape, b.shape, None if offs is None else offs.shape[0])
    try:
        found = _PROBLEMS.get(key)
    except TypeError:  # symbolic sizes (torch.compile with dynamic shapes) do not hash
        return _work_out(a, b, offs)
    if found is None:
        if len(_PROBLEMS) > 256:  # a run has few shapes; a sweep must not grow this forever
            _PROBLEMS.clear()
        found = _PROBLEMS[key] = _work_out(a, b, offs)
    return found


def _work_out(a, b, offs) -> GroupedProblem:
    form = (a.dim(), b.dim())
    if form == (2, 3):
        (m, k), g, n = a.shape, b.shape[0], b.shape[2]
        p = GroupedProblem("2Dx3D", g, m, n, k, "m", m, (m, n), (g, n), "(G, N)")
    elif form == (3, 2):
        (g, m, k), n = a.shape, b.shape[1]
        p = GroupedProblem("3Dx2D", g, m, n, k, "n", n, (m, n), (n,), "(N,)")
    elif form == (2, 2):
        (m, k), g, n = a.shape, offs.shape[0], b.shape[1]
        p = GroupedProblem("2Dx2D", g, m, n, k, "k", k, (g, m, n), (g, n), "(G, N)")
    else:
        (g, m, k), n = a.shape, b.shape[2]
        p = GroupedProblem("3Dx3D", g, m, n, k, None, k, (g, m, n), (g, n), "(G, N)")
    return p


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
    p = grouped_problem(a, b, offs)
    layout = f"{p.form}:{operand_layout(a)}{operand_layout(b)}"
    return (layout, m_bucket(a.shape[-2]), b.shape[-1], a.shape[-1], pow2_bucket(p.groups),
            _dtype_name(out_dtype or a.dtype))


# NOTE [offs read once]: on the CPU the op's data checks read ``offs`` on the host (one
# ``tolist``), and the torch backend needs ``offs[-1]`` again to zero what lies past it:
# a second read costs ~2 us, as much as the rest of that kernel's Python. The checks leave
# the last end here for the call in progress, keyed by the tensor object and its version
# counter (an in-place write in between invalidates it); the kernel reads it as often as
# it needs (a training call masks the unowned rows and zeroes the output's). The memo
# holds the last checked ``offs`` (one small tensor) until the next check replaces it.
_LAST_END: list = [None]


def note_last_end(offs, end: int) -> None:
    """Remember ``end`` (= ``offs[-1]``, read by the caller) for this call's kernel."""
    _LAST_END[0] = (offs, offs._version, end)


def last_end(offs) -> int:
    """``offs[-1]`` as an int (0 for no groups): the value the checks noted for this very
    tensor, else read from it (a host read: CPU tensors only)."""
    memo = _LAST_END[0]
    if memo is not None and memo[0] is offs and memo[1] == offs._version:
        return memo[2]
    return int(offs[-1]) if offs.numel() else 0
