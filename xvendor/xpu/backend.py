"""The ``sycl`` backend: free-function SYCL kernels (``sycl_kernels/*.cpp``), compiled at
run time with SYCL RTC and launched on a SYCL queue.

Runs on XPU tensors (torch's queue; l2) and, on explicit request only
(``backend="sycl"`` / ``XVENDOR_BACKEND=sycl``), on CPU tensors through the OpenCL CPU
SYCL device — which is how CI verifies every kernel without a GPU. It is no default
anywhere: nothing measured shows it beating oneDNN behind ATen on XPU.

Arguments arrive checked by ``xvendor.ops``; the wrappers below pick the kernel (by dtype),
size the nd-range, hand tensors over (``tensors.Launch``) and launch — nothing else.

Code paths:
- gemm: ``gemm_<in>_<out>`` — 2-D grid of BM x BN tiles (gemm_tile.h), any input strides.
- grouped_mm 2Dx3D: ``gmm_rows`` (ragged rows, device-side tile scan over offs, zero rows
  past offs[-1]); 3Dx2D: the same kernel on the transposed problem out^T = b^T @ a[g]^T,
  passed as strides (no copies); 2Dx2D: ``gmm_batch`` with per-group K ranges from offs;
  3Dx3D: ``gmm_batch`` without offs.
- rms_norm: ``rms_norm_<t>`` — one row per work-group, sub-group reductions; x is made
  contiguous and viewed as (rows, D); weight converted to fp32.
- topk: ``topk_<t>`` — radix select then a bitonic sort of the k winners, one row per
  work-group (O(n + k log^2 k) per row; topk.cpp); ``dim`` is moved last and made
  contiguous; largest=False is a kernel flag (NaN stays the greatest value, as in torch);
  results are always sorted (allowed for sorted=False), ties lowest index first.
Bias (gemm, grouped_mm) is converted to fp32 before the launch (N or G*N values).
"""

from __future__ import annotations

import torch

from .. import shapes
from ..numerics import rms_norm_eps
from . import environment, runtime
from .tensors import TAGS, Launch

__all__ = ["KERNELS", "gemm", "grouped_mm", "rms_norm", "topk", "probe", "TILE"]

# The tile of gemm_tile.h (BM, BN) and its work-group (WM, WN); must match its defaults.
TILE = {"WM": 16, "WN": 16, "RM": 4, "RN": 4}
BM, BN = TILE["WM"] * TILE["RM"], TILE["WN"] * TILE["RN"]
_ROW_WG = 128  # work-items per row for rms_norm
# Work-items per row for topk: on the CPU device 16 and 64 time alike on vocabulary rows and
# 64 is 20% slower than 16 on 64-expert router rows, 256 twice as slow there; 64 also gives a
# GPU work-group some width on long rows.
_TOPK_WG = 64
TOPK_MAX_ROW = 1 << 31
P, I64, I32, F32 = runtime.PTR, runtime.I64, runtime.I32, runtime.F32


def probe() -> str | None:
    """``None`` when SYCL kernels can run here (CPU SYCL device or XPU), else why not."""
    reason = environment.setup()
    if reason:
        return reason
    try:
        runtime.kernels_dir()
        runtime.shim.load()  # first use on a machine builds the shim (a few seconds)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    try:
        runtime.cpu_queue()
        return None
    except Exception as e:
        if hasattr(torch, "xpu") and torch.xpu.is_available():
            return None
        return f"no usable SYCL device: {e}"


def _tiles(n: int, tile: int) -> int:
    return -(-n // tile)


def _fp32(bias: torch.Tensor | None) -> torch.Tensor | None:
    return None if bias is None else bias.to(torch.float32).contiguous()


# NOTE [tunable gemm tile]: gemm_tile.h reads its tile from -D options (XV_GEMM_WM, _WN,
# _RM, _RN, _BK); TILE is its default, built with no options. The dispatch layer hands a tuned
# tile to gemm / grouped_mm as ``config=`` (None: the default); each tile is built once and
# cached like any program. The backend never looks a tile up itself, so it does not depend
# on the tuning tables or the registry.
_TILE_KEYS = ("WM", "WN", "RM", "RN", "BK")
DEFAULT_TILE = dict(TILE, BK=64)
last_gemm_tile: dict = {}  # tile of the latest gemm / grouped_mm call (tests prove what ran)


def _tile(config: dict | None) -> dict:
    """The gemm_tile.h tile of ``config`` (extra keys, e.g. block_m, are the tuner's)."""
    if config is None:
        tile = DEFAULT_TILE
    else:
        missing = [k for k in _TILE_KEYS if k not in config]
        if missing:
            raise ValueError(f"sycl gemm config {config!r} lacks the tile keys {missing}")
        tile = {k: int(config[k]) for k in _TILE_KEYS}
    last_gemm_tile.clear()
    last_gemm_tile.update(tile)
    return tile


def _tile_options(tile: dict) -> tuple:
    if all(tile[k] == DEFAULT_TILE[k] for k in _TILE_KEYS):
        return ()
    return tuple(f"-DXV_GEMM_{k}={int(tile[k])}" for k in _TILE_KEYS)


def gemm(a, b, bias=None, out_dtype=None, *, config=None):
    tile = _tile(config)
    bm, bn = tile["WM"] * tile["RM"], tile["WN"] * tile["RN"]
    out_dtype = out_dtype or a.dtype
    (m, k), n = a.shape, b.shape[1]
    out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    if m == 0 or n == 0:
        return out
    run = Launch(a.device)
    pa, (sa_m, sa_k) = run.input("a", a, any_strides=True)
    pb, (sb_k, sb_n) = run.input("b", b, any_strides=True)
    pbias, _ = run.input("bias", _fp32(bias))
    pc = run.output("out", out)
    run.run("gemm", f"gemm_{TAGS[a.dtype]}_{TAGS[out_dtype]}",
            (1, _tiles(m, bm) * tile["WM"], _tiles(n, bn) * tile["WN"]),
            (1, tile["WM"], tile["WN"]),
            [(P, pa), (P, pb), (P, pbias), (P, pc), (I64, m), (I64, n), (I64, k),
             (I64, sa_m), (I64, sa_k), (I64, sb_k), (I64, sb_n)], options=_tile_options(tile))
    return out


def grouped_mm(a, b, offs=None, bias=None, out_dtype=None, *, config=None):
    tile = _tile(config)
    out_dtype = out_dtype or a.dtype
    name = f"{TAGS[a.dtype]}_{TAGS[out_dtype]}"
    p = shapes.grouped_problem(a, b, offs)
    out = torch.empty(p.out_shape, dtype=out_dtype, device=a.device)
    if p.ragged in ("m", "n"):  # rows of a ragged; 3Dx2D: columns of b -> rows of out^T
        return _ragged_rows(name, a, b, offs, bias, out, p, tile=tile)
    bm, bn = tile["WM"] * tile["RM"], tile["WN"] * tile["RN"]
    groups, m, n, k = p.groups, p.m, p.n, p.k
    if out.numel() == 0:
        return out
    run, (pa, sa), (pb, sb), po, pbias, pc = _grouped_operands(a, b, offs, bias, out)
    sa_g, sb_g = (sa[0], sb[0]) if a.dim() == 3 else (0, 0)  # 2Dx2D: groups share a and b
    run.run("grouped_mm", f"gmm_batch_{name}",
            (groups, _tiles(m, bm) * tile["WM"], _tiles(n, bn) * tile["WN"]),
            (1, tile["WM"], tile["WN"]),
            [(P, pa), (P, pb), (P, po), (P, pbias), (P, pc), (I64, m), (I64, n), (I64, k),
             (I64, sa_g), (I64, sa[-2]), (I64, sa[-1]), (I64, sb_g), (I64, sb[-2]),
             (I64, sb[-1])], options=_tile_options(tile))
    return out


def _grouped_operands(a, b, offs, bias, out):
    """A launch with the grouped operands copied in: (run, (a ptr, strides), (b ptr,
    strides), offs ptr, bias ptr, out ptr)."""
    run = Launch(a.device)
    pa = run.input("a", a, any_strides=True)
    pb = run.input("b", b, any_strides=True)
    po, _ = run.input("offs", offs)
    pbias, _ = run.input("bias", _fp32(bias))
    return run, pa, pb, po, pbias, run.output("out", out)


def _ragged_rows(name, a, b, offs, bias, out, p, tile):
    """2Dx3D, or 3Dx2D as its transpose: out^T (N, M) = b^T (N, K) @ a[g]^T (K, M)."""
    if out.numel() == 0:
        return out
    run, (pa, sa), (pb, sb), po, pbias, pc = _grouped_operands(a, b, offs, bias, out)
    groups, k = p.groups, p.k
    if p.ragged == "m":  # rows: a (R, K); per group b[g] (K, N); bias[g, n]
        rows, cols = p.m, p.n
        lhs, rhs = (pa, sa[0], sa[1]), (pb, sb[0], sb[1], sb[2])
        bias_s, out_s = (cols, 0, 1), (cols, 1)
    else:  # rows: columns of b, i.e. b^T (N, K); per group a[g]^T (K, M); bias[row]
        rows, cols = p.n, p.m
        lhs, rhs = (pb, sb[1], sb[0]), (pa, sa[0], sa[2], sa[1])
        bias_s, out_s = (0, 1, 0), (1, rows)
    bm, bn = tile["WM"] * tile["RM"], tile["WN"] * tile["RN"]
    slots = rows // bm + groups + 1  # every segment wastes less than one tile
    run.run("grouped_mm", f"gmm_rows_{name}",
            (1, slots * tile["WM"], _tiles(cols, bn) * tile["WN"]), (1, tile["WM"], tile["WN"]),
            [(P, lhs[0]), (P, rhs[0]), (P, po), (P, pbias), (P, pc), (I64, rows), (I64, cols),
             (I64, k), (I64, groups), (I64, lhs[1]), (I64, lhs[2]), (I64, rhs[1]),
             (I64, rhs[2]), (I64, rhs[3]), (I64, bias_s[0]), (I64, bias_s[1]),
             (I64, bias_s[2]), (I64, out_s[0]), (I64, out_s[1])], options=_tile_options(tile))
    return out


def rms_norm(x, weight=None, eps=None):
    eps = float(rms_norm_eps(x.dtype, eps))
    d = weight.numel() if weight is not None else x.shape[-1]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    rows = x.numel() // d
    run = Launch(x.device)
    px, _ = run.input("x", x)
    pw, _ = run.input("weight", _fp32(weight))
    py = run.output("out", out)
    run.run("rms_norm", f"rms_norm_{TAGS[x.dtype]}", (rows * _ROW_WG,), (_ROW_WG,),
            [(P, px), (P, pw), (P, py), (I64, d), (F32, eps)])
    return out


def topk(x, k, dim=-1, largest=True, sorted=True):
    xl = x.movedim(dim, -1)
    n = xl.shape[-1]
    if n >= TOPK_MAX_ROW:
        raise ValueError(f"sycl topk: rows of {n} entries; the kernel keeps positions in a row in "
                         f"32-bit integers (rows under {TOPK_MAX_ROW} entries)")
    lead = xl.shape[:-1]
    values = torch.empty((*lead, k), dtype=x.dtype, device=x.device)
    indices = torch.empty((*lead, k), dtype=torch.int64, device=x.device)
    if values.numel():
        rows = values.numel() // k
        run = Launch(x.device)
        px, _ = run.input("x", xl)
        pv = run.output("values", values)
        pi = run.output("indices", indices)
        run.run("topk", f"topk_{TAGS[x.dtype]}", (rows * _TOPK_WG,), (_TOPK_WG,),
                [(P, px), (P, pv), (P, pi), (I64, n), (I64, k), (I32, int(bool(largest)))])
    if dim in (-1, x.dim() - 1):
        return values, indices
    return values.movedim(-1, dim).contiguous(), indices.movedim(-1, dim).contiguous()


KERNELS = {"gemm": gemm, "grouped_mm": grouped_mm, "rms_norm": rms_norm, "topk": topk}
