"""Host side of the FlyDSL templates: check, normalize operands, allocate, build the launch.

``plan_gemm`` / ``plan_grouped`` turn the op's arguments into a ``Launch``: the
specialization key (template, majors, dtypes, bias), the kernel arguments (``ARGS``) and
the output to return. ``specialization`` gives the same key without allocating or copying
(the plans take it from there); the dispatch layer keys one correctness verdict per
compiled specialization on it. The backend runs the launch; the cross-compiler
(``xvendor.rocm.crosscompile``) builds the very same specialization from placeholder
tensors, so the checked code object is the one a device would run.

Operand normalization (the only reasons the host copies an operand):
- A is viewed as (M, K), B as (N, K). Each is K-major (K contiguous) or MN-major (M/N
  contiguous) with a leading dimension (and, for 3-D operands, a group stride) that is a
  multiple of 8 elements and a 16-byte aligned start (16-byte loads); anything else is
  copied to K-major.
- ragged M (2Dx3D) needs a K-major A (the group bound is on rows); ragged K (2Dx2D) needs
  both operands MN-major (the group bound is on K rows). Other majors are copied.
Sizes never cause a copy: M, N and K need not be multiples of the tile. The kernels mask
their tails themselves (NOTE [K tail] and [N tail] in ``xvendor.rocm.gemm_gfx950``): M
tails and ragged group ends by the buffer descriptors' sizes, a K-major operand's K tail
by zeroing the loaded values past K (gfx950) or by the Tensor Data Mover's extents
(gfx1250), and C's N tail by predicated stores. C is allocated (M, N) (or (G, M, N)) and
returned as it is. Its stores are vectors along N as wide as ``n_align`` (the largest of 8,
4, 2, 1 dividing N, part of the specialization) and the accumulator allow.
``tests/rocm/test_launch.py`` proves this on the plans: for non-multiple sizes the kernel
gets the caller's tensors (views of the same storage) and the plan allocates nothing but C.
3Dx2D is computed as 2Dx3D on the transposed problem (out.T = b.T @ a[g].T per group):
the kernel writes the caller's (M, N) output directly, through a column-major C (``spec
c_col_major``: element stores, rows predicated in the kernel), so the output is not copied;
its (N,) bias, which is not per group, is added on the host (a new tensor, only then).

Proven on the CPU: tests/rocm/test_layout_proofs.py runs the kernels' own tile mapping
(``xvendor.rocm.tiling``) over every program of the grids planned here; tests/rocm/
test_launch.py checks ``specialization`` against the plans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import shapes

_DT = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
_MAX_BYTES = 2**31  # buffer descriptors hold 32-bit byte counts


# The launcher's positional parameters, in order (``build``'s ``launch`` in both templates).
ARGS = ("A", "B", "C", "Bias", "Offs", "M", "N", "K", "G", "lda", "ldb", "ldc",
        "sag", "sbg", "scg", "sbiasg", "tiles_m", "tiles_n", "grid")


@dataclass
class Launch:
    template: str  # "gemm" | "2Dx3D" | "2Dx2D" | "3Dx3D"
    spec: dict  # build() keywords: dtype, out_dtype, has_bias, a_k_major, b_k_major, n_align
    args: tuple  # the launcher's arguments, named by ARGS
    result: callable = field(repr=False)  # () -> the op's output

    def named(self) -> dict:
        return dict(zip(ARGS, self.args))


def n_align(n: int) -> int:
    """The largest of 8, 4, 2, 1 dividing N: the widest C store (in elements) the kernel may
    use without a vector straddling C's last column (``gemm_gfx950.store_width``)."""
    return next(v for v in (8, 4, 2, 1) if n % v == 0)


def _cdiv(a, b):
    return -(-a // b)


def _aligned(t: torch.Tensor, ld: int) -> bool:
    """16-byte loads from every row (ld) and every group (stride 0 of a 3-D operand)."""
    groups_ok = t.dim() < 3 or t.shape[0] <= 1 or t.stride(0) % 8 == 0
    return ld % 8 == 0 and t.data_ptr() % 16 == 0 and groups_ok


def _major(t: torch.Tensor) -> str | None:
    """'k' if the last dim is contiguous (ld % 8 == 0), 'mn' if the one before is, else None."""
    if t.stride(-1) == 1 and _aligned(t, t.stride(-2)):
        return "k"
    if t.stride(-2) == 1 and _aligned(t, t.stride(-1)):
        return "mn"
    return None


def _k_major(t: torch.Tensor, need: str | None) -> bool:
    """Whether the kernel gets ``t`` K-major: as required, else as it is (copied if neither)."""
    return (need or _major(t)) != "mn"


def _as_k_major(t: torch.Tensor) -> torch.Tensor:
    """``t`` (..., rows, K) with K contiguous and a leading dim % 8 == 0 (a copy if not)."""
    if _major(t) == "k":
        return t
    k = t.shape[-1]
    out = t.new_zeros(*t.shape[:-1], _cdiv(max(k, 1), 8) * 8)
    out[..., :k] = t
    return out[..., :k]


def _as_mn_major(t: torch.Tensor) -> torch.Tensor:
    """``t`` (..., rows, K) with rows contiguous and K's stride % 8 == 0."""
    if _major(t) == "mn":
        return t
    rows = t.shape[-2]
    buf = t.new_zeros(*t.shape[:-2], t.shape[-1], _cdiv(max(rows, 1), 8) * 8)
    buf[..., :rows] = t.transpose(-2, -1)
    return buf.transpose(-2, -1)[..., :rows, :]


def _ld(t: torch.Tensor, k_major: bool) -> int:
    return t.stride(-2) if k_major else t.stride(-1)


def _check_size(**tensors) -> None:
    for name, t in tensors.items():
        if t is not None and t.numel() * t.element_size() >= _MAX_BYTES:
            raise ValueError(f"xvendor flydsl backend: {name} holds {t.numel() * t.element_size()} "
                             "bytes; buffer descriptors address under 2**31 bytes per operand. "
                             "Use backend='aten' or 'triton' for this size.")


def _placeholder(device) -> torch.Tensor:
    return torch.zeros(8, dtype=torch.float32, device=device)


@dataclass
class _Problem:
    """An op call as the kernel sees it, before any copy: A (…, rows, K), B (…, N, K) views."""
    template: str
    a: torch.Tensor
    b: torch.Tensor
    bias: torch.Tensor | None  # what the kernel adds (3Dx2D's bias is added on the host)
    out_dtype: torch.dtype
    spec: dict


def _problem(op: str, args: tuple) -> _Problem:
    if op == "gemm":
        a, b, bias, out_dtype = (tuple(args) + (None,) * 4)[:4]
        template, av, bv, need_a, need_b = "gemm", a, b.t(), None, None
    elif op == "grouped_mm":
        a, b, offs, bias, out_dtype = (tuple(args) + (None,) * 5)[:5]
        if a.dim() == 3 and b.dim() == 2:  # out.T = b.T @ a[g].T: 2Dx3D, bias on the host
            p = _problem(op, (b.t(), a.transpose(1, 2), offs, None, out_dtype or a.dtype))
            # the kernel's C is the caller's output transposed: column-major, element stores
            p.spec.update(c_col_major=True, n_align=1)
            return p
        if a.dim() == 2 and b.dim() == 3:  # the group bound is on rows: A K-major
            template, av, bv, need_a, need_b = "2Dx3D", a, b.transpose(1, 2), "k", None
        elif a.dim() == 2:  # the group bound is on K rows: both MN-major
            template, av, bv, need_a, need_b = "2Dx2D", a, b.t(), "mn", "mn"
        else:
            template, av, bv, need_a, need_b = "3Dx3D", a, b.transpose(1, 2), None, None
    else:
        raise KeyError(f"the flydsl templates run gemm and grouped_mm, not {op!r}")
    out_dtype = out_dtype or a.dtype
    spec = {"dtype": _DT[a.dtype], "out_dtype": _DT[out_dtype], "has_bias": bias is not None,
            "a_k_major": _k_major(av, need_a), "b_k_major": _k_major(bv, need_b),
            "n_align": n_align(bv.shape[-2]), "c_col_major": False}
    return _Problem(template, av, bv, bias, out_dtype, spec)


def specialization(op: str, args: tuple, cfg=None) -> tuple[str, dict]:
    """(template, spec) that ``plan_gemm`` / ``plan_grouped`` put in their ``Launch``.

    ``args``: the op's arguments, (a, b, bias, out_dtype) for gemm and (a, b, offs, bias,
    out_dtype) for grouped_mm. Decided from dtypes, strides and alignment alone: no data is
    allocated, copied or read, so the dispatch layer can key per-specialization verdicts on
    it for every call. The plans take their majors from here, so the two cannot disagree.
    ``cfg`` does not change the specialization: tile sizes never pad or re-major.
    """
    p = _problem(op, args)
    return p.template, dict(p.spec)


def _operands(p: _Problem):
    A = _as_k_major(p.a) if p.spec["a_k_major"] else _as_mn_major(p.a)
    B = _as_k_major(p.b) if p.spec["b_k_major"] else _as_mn_major(p.b)
    return A, B


def plan_gemm(a, b, bias, out_dtype, cfg) -> Launch:
    """gemm: a (M, K), b (K, N); NT (b = w.t()) and NN (b row-major) run without copies."""
    p = _problem("gemm", (a, b, bias, out_dtype))
    M, K = a.shape
    N = b.shape[1]
    A, B = _operands(p)
    C = torch.empty((M, N), dtype=p.out_dtype, device=a.device)
    bias32 = bias.float().contiguous() if bias is not None else _placeholder(a.device)
    _check_size(a=A, b=B, out=C)
    tiles_m, tiles_n = _cdiv(M, cfg.block_m), _cdiv(N, cfg.block_n)
    args = (A, B, C, bias32, torch.zeros(1, dtype=torch.int32, device=a.device),
            M, N, K, 1, _ld(A, p.spec["a_k_major"]), _ld(B, p.spec["b_k_major"]), N,
            0, 0, 0, 0, tiles_m, tiles_n, max(tiles_m * tiles_n, 1))
    return Launch("gemm", p.spec, args, lambda: C)


def plan_grouped(a, b, offs, bias, out_dtype, cfg) -> Launch:
    """grouped_mm, the four layouts (3Dx2D as 2Dx3D of the transposed problem, writing the
    caller's output through a column-major C: no copy of the output)."""
    out_dtype = out_dtype or a.dtype
    dev = a.device
    p = _problem("grouped_mm", (a, b, offs, bias, out_dtype))
    host_bias = bias if p.spec["c_col_major"] else None  # 3Dx2D: (N,) bias, not per group
    if p.spec["c_col_major"]:
        a, b, bias = b.t(), a.transpose(1, 2), None  # the problem the kernel runs
    mode = p.template
    # the problem the kernel runs (3Dx2D: its transpose, a 2Dx3D ragged over the rows)
    kp = shapes.grouped_problem(a, b, offs)
    G, M, N, K = kp.groups, kp.m, kp.n, kp.k
    A, B = _operands(p)
    shape = (M, N) if mode == "2Dx3D" else (G, M, N)
    # zeros: rows past offs[-1] (2Dx3D) are never written by the kernel and must read 0
    if p.spec["c_col_major"]:  # 3Dx2D: the caller's (M', T) output is the kernel's C^T
        out = torch.zeros((N, M), dtype=out_dtype, device=dev)
        C = out.t()
    else:
        C = out = torch.zeros(shape, dtype=out_dtype, device=dev) if mode == "2Dx3D" else \
            torch.empty(shape, dtype=out_dtype, device=dev)
    ldc = M if p.spec["c_col_major"] else N  # C's row length, or its column's (3Dx2D)
    bias32 = bias.float().contiguous() if bias is not None else _placeholder(dev)
    _check_size(a=A, b=B, out=C)
    tiles_m, tiles_n = _cdiv(M, cfg.block_m), _cdiv(N, cfg.block_n)
    # ragged M: a group's last tile may be partial, so each group may add one row tile
    grid = (tiles_m + G) * tiles_n if mode == "2Dx3D" else G * tiles_m * tiles_n
    offs_t = offs if offs is not None else torch.zeros(1, dtype=torch.int32, device=dev)
    args = (A, B, C, bias32, offs_t, M, N, K, G,
            _ld(A, p.spec["a_k_major"]), _ld(B, p.spec["b_k_major"]), ldc,
            A.stride(0) if A.dim() == 3 else 0, B.stride(0) if B.dim() == 3 else 0,
            C.stride(0) if C.dim() == 3 else 0, N if bias is not None else 0,
            tiles_m, tiles_n, max(grid, 1))
    if host_bias is None:
        return Launch(mode, p.spec, args, lambda: out)

    def result():  # 3Dx2D's bias, live on the columns of the groups (not past offs[-1])
        end = offs[-1] if offs.numel() else 0
        live = torch.arange(out.shape[1], device=dev) < end
        return (out.float() + torch.where(live, host_bias.float(), 0.0)).to(out_dtype)
    return Launch(mode, p.spec, args, result)
