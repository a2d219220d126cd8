"""Portable Triton templates: a GEMM and a ragged grouped GEMM (the four ``grouped_mm`` layouts).

Math (fp32 accumulation, one rounding to the output dtype at the end):

    gemm:        C = A @ B (+ bias[n])                       A (M, K), B (K, N), C (M, N)
    grouped_mm:  for each group g, with [s_g, e_g) = [offs[g-1], offs[g]) (s_0 = 0):
        RAGGED_M  (2Dx3D)  C[s:e, :]  = A[s:e, :]   @ B[g]        (+ bias[g, :])
        RAGGED_N  (3Dx2D)  C[:, s:e]  = A[g]        @ B[:, s:e]   (+ bias[s:e])
        RAGGED_K  (2Dx2D)  C[g]       = A[:, s:e]   @ B[s:e, :]   (+ bias[g, :])
        BATCHED   (3Dx3D)  C[g]       = A[g]        @ B[g]        (+ bias[g, :])
      RAGGED_M / RAGGED_N write zeros to the rows / columns past offs[-1] (a "tail group"
      with K = 0 and no bias), so the output needs no memset and is never garbage.

Code paths:
- ``_tile_mma``: the one K loop both templates share (masked on every edge, so any
  M/N/K works; ``PRECISION`` is the ``tl.dot`` input precision for fp32 inputs; ``UPCAST``
  converts fp16/bf16 tiles to fp32 before ``tl.dot``, used only under the interpreter,
  whose bf16 ``tl.dot`` is wrong, triton#11584).
- ``_tile_coords``: tile id -> (pid_m, pid_n) in GROUP_M-row bands, for L2 reuse.
- ``gemm_kernel``: one program per output tile.
- ``grouped_mm_kernel``: persistent; program ``p`` of ``P`` takes the tiles ``p, p+P, ...``
  of the concatenated group x tile space. Group sizes are read from ``offs`` on the device,
  so there is no host sync and empty groups cost nothing.

NOTE [ragged contiguous dim]: group starts come from ``offs`` at run time, with no known
alignment, so when the ragged dimension is an operand's contiguous one (3Dx2D with a
row-major b, 2Dx2D with a row-major a) loads along it cannot be vectorized: element loads,
and 2-161 spilled VGPRs with the default configs in a cross-compile. The layouts MoE
autograd produces (2Dx2D with a = x.t(), 3Dx2D with b = w.t()) keep the ragged dimension
strided and compile cleanly; ``crosscompile.PROBLEMS`` checks those. Correct either way.

Group/row offsets are computed in int64 (``tl.cast``: ``.to`` on a loop variable fails in
the interpreter); in-tile offsets stay int32.
"""

from __future__ import annotations

import triton
import triton.language as tl

# grouped_mm layouts, as the RAGGED constexpr
BATCHED, RAGGED_M, RAGGED_N, RAGGED_K = 0, 1, 2, 3


@triton.jit
def _tile_coords(tile, num_m, num_n, GROUP_M: tl.constexpr):
    """Tile id -> (pid_m, pid_n), walking GROUP_M tile-rows at a time (L2 reuse of B)."""
    per_band = GROUP_M * num_n
    band = tile // per_band
    first_m = band * GROUP_M
    band_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_band) % band_m
    pid_n = (tile % per_band) // band_m
    return pid_m, pid_n


@triton.jit
def _tile_mma(a_base, b_base, m_size, n_size, k_size, pid_m, pid_n,
              stride_am, stride_ak, stride_bk, stride_bn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """fp32 accumulator of one (BLOCK_M, BLOCK_N) tile of A[:m, :k] @ B[:k, :n]."""
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_base + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_base + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    m_ok = rm[:, None] < m_size
    n_ok = rn[None, :] < n_size
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(k_size, BLOCK_K)):
        k_left = k_size - k * BLOCK_K
        a = tl.load(a_ptrs, mask=m_ok & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & n_ok, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def _store_tile(acc, c_base, bias_base, m_size, n_size, pid_m, pid_n,
                stride_cm, stride_cn, stride_bias, bias_n,
                HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Epilogue: + bias[n] for n < ``bias_n`` (in fp32), one rounding, masked store."""
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = rn < n_size
    if HAS_BIAS:
        bias = tl.load(bias_base + rn * stride_bias, mask=rn < bias_n, other=0.0)
        acc += bias.to(tl.float32)[None, :]
    c_ptrs = c_base + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_base.dtype.element_ty), mask=(rm[:, None] < m_size) & n_ok[None, :])


@triton.jit
def gemm_kernel(
    # Pointers
    a_ptr, b_ptr, bias_ptr, c_ptr,
    # Sizes
    M, N, K,
    # Strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_bias,
    # Meta-parameters
    HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """C (M, N) = A (M, K) @ B (K, N) (+ bias (N,)); one program per output tile."""
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_m, num_n, GROUP_M)
    acc = _tile_mma(a_ptr, b_ptr, M, N, K, pid_m, pid_n, stride_am, stride_ak, stride_bk,
                    stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, PRECISION, UPCAST)
    _store_tile(acc, c_ptr, bias_ptr, M, N, pid_m, pid_n, stride_cm, stride_cn, stride_bias,
                N, HAS_BIAS, BLOCK_M, BLOCK_N)


@triton.jit
def grouped_mm_kernel(
    # Pointers
    a_ptr, b_ptr, bias_ptr, c_ptr, offs_ptr,
    # Sizes (M, N, K: the full extents; the ragged one is split by offs)
    G, M, N, K,
    # Strides (0 for a group dimension the operand does not have)
    stride_ag, stride_am, stride_ak,
    stride_bg, stride_bk, stride_bn,
    stride_cg, stride_cm, stride_cn,
    stride_biasg, stride_biasn,
    # Meta-parameters
    RAGGED: tl.constexpr, HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Persistent ragged grouped GEMM; the layouts are in the module docstring."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    # RAGGED_M / RAGGED_N visit one extra "tail group": rows/cols past offs[-1], zero-filled.
    HAS_TAIL: tl.constexpr = (RAGGED == 1) or (RAGGED == 2)
    if HAS_TAIL:
        groups = G + 1
    else:
        groups = G
    done = pid * 0  # tiles in the groups before g (an i32 scalar: it is loop-carried)
    for g in range(0, groups):
        if RAGGED != 0:
            start = tl.load(offs_ptr + g - 1, mask=g > 0, other=0)
            s64 = tl.cast(start, tl.int64)
            if RAGGED == 1:
                end = tl.load(offs_ptr + g, mask=g < G, other=M)
            elif RAGGED == 2:
                end = tl.load(offs_ptr + g, mask=g < G, other=N)
            else:
                end = tl.load(offs_ptr + g)
        live = g < G  # False only for the tail group
        m_size = M
        n_size = N
        k_size = K
        gi = tl.cast(g, tl.int64)
        a_base = a_ptr + gi * stride_ag
        b_base = b_ptr + gi * stride_bg
        c_base = c_ptr + gi * stride_cg
        bias_base = bias_ptr + gi * stride_biasg
        if RAGGED == 1:
            m_size = end - start
            k_size = tl.where(live, K, 0)
            a_base += s64 * stride_am
            c_base += s64 * stride_cm
        elif RAGGED == 2:
            n_size = end - start
            k_size = tl.where(live, K, 0)
            b_base += s64 * stride_bn
            c_base += s64 * stride_cn
            bias_base = bias_ptr + s64 * stride_biasn
        elif RAGGED == 3:
            k_size = end - start
            a_base += s64 * stride_ak
            b_base += s64 * stride_bk
        bias_n = tl.where(live, n_size, 0)
        num_m = tl.cdiv(m_size, BLOCK_M)
        num_n = tl.cdiv(n_size, BLOCK_N)
        tiles = num_m * num_n
        # this program's first tile in the group: the t >= 0 with (done + t) % programs == pid
        first = (pid + programs - done % programs) % programs
        for t in range(first, tiles, programs):
            pid_m, pid_n = _tile_coords(t, num_m, num_n, GROUP_M)
            acc = _tile_mma(a_base, b_base, m_size, n_size, k_size, pid_m, pid_n,
                            stride_am, stride_ak, stride_bk, stride_bn,
                            BLOCK_M, BLOCK_N, BLOCK_K, PRECISION, UPCAST)
            _store_tile(acc, c_base, bias_base, m_size, n_size, pid_m, pid_n,
                        stride_cm, stride_cn, stride_biasn, bias_n, HAS_BIAS, BLOCK_M, BLOCK_N)
        done += tiles
