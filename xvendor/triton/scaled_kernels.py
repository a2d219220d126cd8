"""Triton templates of the scaled family: FP8/MX GEMM and ragged grouped GEMM.

Math (fp32 accumulation, scales applied as below, + bias in fp32, one rounding at the end):

    MX (BlockWise1x32, ``tl.dot_scaled``): C[m, n] = sum_j sa[m, j] * sb[n, j] *
        sum_{k in block j} a[m, k] * b[k, n], with E8M0 scales (uint8 codes, 2^(c - 127)),
        one per 32 elements along K. Element formats per operand: e4m3, e5m2, e2m1 (fp4,
        two per byte along K, the lower K index in the low nibble); mixed formats (e.g.
        e2m1 x e4m3) are a template parameter.
    TensorWise / RowWise (plain fp8 ``tl.dot``): C = (A @ B) * sa[m] * sb[n], the scales
        applied once in the epilogue; TensorWise is RowWise with a scale stride of 0.

    scaled_mm_kernel:          C (M, N) = A (M, K) @ B (K, N)                 (+ bias (N,))
    scaled_grouped_mm_kernel:  with [s_g, e_g) = [offs[g-1], offs[g]) (s_0 = 0):
        RAGGED_M (2Dx3D, MoE forward)  C[s:e, :] = A[s:e, :] @ B[g]   scales: sa rows s:e,
                                       sb of group g; rows past offs[-1] are written as zeros
        RAGGED_K (2Dx2D, weight grad)  C[g] = A[:, s:e] @ B[s:e, :]  MX only; s % 32 == 0 (the
                                       op checks it), so scale block j of the group is
                                       block s/32 + j of the operand's scales

Code paths:
- ``_scaled_tile``: the K loop (masked on every edge, so any M/N/K works; scales past K
  load as 127 = 2^0 next to zero elements, never the NaN code). Under MX, loads cover
  whole 32-element blocks and a ragged-K group ending inside one zeroes the rest after the
  load (``_zero_past_k``, fp4 down to the nibble): NOTE [K masks]. fp8 tiles go to
  ``tl.dot`` as fp8 (the interpreter's fp8 ``tl.dot`` is exact, unlike its bf16 one: no
  upcast workaround is needed here).
- ``_scaled_epilogue``: RowWise/TensorWise scale, bias, one rounding, masked store.
- the grouped kernel is persistent like ``kernels.grouped_mm_kernel`` (program ``p`` of
  ``P`` takes tiles ``p, p+P, ...`` of the concatenated group x tile space; group sizes are
  read from ``offs`` on the device: no host sync, empty groups cost nothing).

Verified without a GPU: the numerics in the Triton interpreter against the fp64 oracle and
the ``reference`` backend (tests/triton/test_scaled_interpreter.py), and that every shipped
config compiles for gfx950, gfx1250, sm_100 and sm_90 to the expected matrix instruction
without spills (test_scaled_crosscompile.py). Not verified here: running on hardware, i.e.
that Triton's lowering feeds each E8M0 scale to the right lanes of the scaled MFMA/WMMA/
tcgen05 instruction; test_scaled_gpu.py (l2) and the correctness gate check that on a
device.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .kernels import _tile_coords

# scaled_grouped_mm layouts (the RAGGED constexpr; the values of kernels.RAGGED_M/RAGGED_K)
RAGGED_M, RAGGED_K = 1, 3


@triton.jit
def _zero_past_k(x, idx, k_left, PACK: tl.constexpr):
    """Zero the elements at K index >= ``k_left`` of a tile loaded by whole blocks; ``idx``
    is the byte index along K (fp4: a byte may hold the last element and the next one).
    A byte mask from min/max arithmetic rather than per-element selects: on gfx950 the
    selects' compare results live in scalar registers and spilled them (99 SGPRs)."""
    if PACK == 2:
        n = tl.minimum(tl.maximum(k_left - idx * 2, 0), 2)  # elements of this byte kept
        keep = (1 << (n * 4)) - 1  # 0x00, 0x0F or 0xFF
    else:
        keep = tl.minimum(tl.maximum(k_left - idx, 0), 1) * 255
    bits = x.to(tl.uint8, bitcast=True) & keep.to(tl.uint8)
    return bits.to(x.dtype, bitcast=True)


@triton.jit
def _scaled_tile(a_base, b_base, sa_base, sb_base, m_size, n_size, k_size, pid_m, pid_n,
                 stride_am, stride_ak, stride_bk, stride_bn,
                 stride_sam, stride_sak, stride_sbn, stride_sbk,
                 MX: tl.constexpr, A_FMT: tl.constexpr, B_FMT: tl.constexpr,
                 PARTIAL_K: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """fp32 accumulator of one (BLOCK_M, BLOCK_N) tile; K counted in elements, fp4 operands
    addressed in bytes (strides along K are per byte)."""
    A_PACK: tl.constexpr = 2 if A_FMT == "e2m1" else 1
    B_PACK: tl.constexpr = 2 if B_FMT == "e2m1" else 1
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rka = tl.arange(0, BLOCK_K // A_PACK)  # bytes of a along K
    rkb = tl.arange(0, BLOCK_K // B_PACK)
    m_ok = rm[:, None] < m_size
    n_ok = rn[None, :] < n_size
    a_ptrs = a_base + rm[:, None] * stride_am + rka[None, :] * stride_ak
    b_ptrs = b_base + rkb[:, None] * stride_bk + rn[None, :] * stride_bn
    if MX:
        rs = tl.arange(0, BLOCK_K // 32)
        sa_ptrs = sa_base + rm[:, None] * stride_sam + rs[None, :] * stride_sak
        sb_ptrs = sb_base + rn[:, None] * stride_sbn + rs[None, :] * stride_sbk
    # NOTE [K masks]: the load masks compare the loaded index itself against a bound the
    # compiler can see is a multiple of 16 bytes, or it cannot vectorize the loads (one byte
    # each, and on gfx950 SGPR spills from the per-byte exec masks). Under MX, K is a
    # multiple of 32 and so is every group start (the op checks both), so whole 32-element
    # blocks up to ceil(k_size / 32) stay inside the tensor; only a ragged-K group's end
    # can fall inside a block (PARTIAL_K), and those elements are zeroed after the load.
    if MX:
        ka_size = tl.cdiv(k_size, 32) * (32 // A_PACK)  # bytes of whole blocks
        kb_size = tl.cdiv(k_size, 32) * (32 // B_PACK)
    else:
        ka_size = k_size
        kb_size = k_size
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(k_size, BLOCK_K)):
        k_left = k_size - k * BLOCK_K
        a = tl.load(a_ptrs, mask=m_ok & (rka[None, :] < ka_size - k * (BLOCK_K // A_PACK)),
                    other=0.0)
        b = tl.load(b_ptrs, mask=(rkb[:, None] < kb_size - k * (BLOCK_K // B_PACK)) & n_ok,
                    other=0.0)
        if PARTIAL_K:
            a = _zero_past_k(a, rka[None, :], k_left, A_PACK)
            b = _zero_past_k(b, rkb[:, None], k_left, B_PACK)
        if MX:
            s_ok = rs[None, :] < tl.cdiv(k_size, 32) - k * (BLOCK_K // 32)
            sa = tl.load(sa_ptrs, mask=m_ok & s_ok, other=127)
            sb = tl.load(sb_ptrs, mask=(rn[:, None] < n_size) & s_ok, other=127)
            acc = tl.dot_scaled(a, sa, A_FMT, b, sb, B_FMT, acc)
            sa_ptrs += (BLOCK_K // 32) * stride_sak
            sb_ptrs += (BLOCK_K // 32) * stride_sbk
        else:
            # NOTE [fp8 accumulation]: sm_90's fp8 wgmma accumulates in reduced precision;
            # Triton's default there never promotes (fast accumulation). Promoting into the
            # fp32 accumulator once per K step (BLOCK_K products) is torch's
            # use_fast_accum=False contract. Other targets ignore the argument.
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
        a_ptrs += (BLOCK_K // A_PACK) * stride_ak
        b_ptrs += (BLOCK_K // B_PACK) * stride_bk
    return acc


@triton.jit
def _scaled_epilogue(acc, c_base, sa_base, sb_base, bias_ptr, m_size, n_size, pid_m, pid_n,
                     stride_cm, stride_cn, stride_sa, stride_sb, stride_bias, scale_ok,
                     MX: tl.constexpr, HAS_BIAS: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """RowWise/TensorWise scales (fp32, ``stride 0`` = TensorWise), bias, rounding, store."""
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < m_size
    n_ok = rn < n_size
    if not MX:
        sa = tl.load(sa_base + rm * stride_sa, mask=m_ok, other=0.0)
        sb = tl.load(sb_base + rn * stride_sb, mask=n_ok, other=0.0)
        sa = tl.where(scale_ok, sa, 0.0)  # the zero tail rows: never 0 * an inf/NaN scale
        acc = acc * sa[:, None] * sb[None, :]
    if HAS_BIAS:
        bias = tl.load(bias_ptr + rn * stride_bias, mask=n_ok, other=0.0)
        acc += bias.to(tl.float32)[None, :]
    c_ptrs = c_base + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_base.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def scaled_mm_kernel(
    # Pointers (fp4 operands and E8M0 scales as uint8)
    a_ptr, b_ptr, sa_ptr, sb_ptr, bias_ptr, c_ptr,
    # Sizes (K in elements)
    M, N, K,
    # Strides (fp4: per byte along K). MX scales: (M, K/32) and (N, K/32); RowWise:
    # stride_sam / stride_sbn per row / column, 0 for TensorWise; the K strides unused.
    stride_am, stride_ak, stride_bk, stride_bn,
    stride_sam, stride_sak, stride_sbn, stride_sbk,
    stride_cm, stride_cn, stride_bias,
    # Meta-parameters
    MX: tl.constexpr, A_FMT: tl.constexpr, B_FMT: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """C (M, N) = scaled A (M, K) @ scaled B (K, N) (+ bias); one program per output tile."""
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_m, num_n, GROUP_M)
    acc = _scaled_tile(a_ptr, b_ptr, sa_ptr, sb_ptr, M, N, K, pid_m, pid_n,
                       stride_am, stride_ak, stride_bk, stride_bn,
                       stride_sam, stride_sak, stride_sbn, stride_sbk,
                       MX, A_FMT, B_FMT, False, BLOCK_M, BLOCK_N, BLOCK_K)
    _scaled_epilogue(acc, c_ptr, sa_ptr, sb_ptr, bias_ptr, M, N, pid_m, pid_n,
                     stride_cm, stride_cn, stride_sam, stride_sbn, stride_bias, True,
                     MX, HAS_BIAS, BLOCK_M, BLOCK_N)


@triton.jit
def scaled_grouped_mm_kernel(
    # Pointers (fp4 operands and E8M0 scales as uint8)
    a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, offs_ptr,
    # Sizes (M, N, K: the full extents; the ragged one is split by offs; K in elements)
    G, M, N, K,
    # Strides (fp4: per byte along K; 0 for a group dimension the tensor does not have)
    stride_am, stride_ak,
    stride_bg, stride_bk, stride_bn,
    stride_sam, stride_sak,
    stride_sbg, stride_sbn, stride_sbk,
    stride_cg, stride_cm, stride_cn,
    # Meta-parameters
    RAGGED: tl.constexpr, MX: tl.constexpr, A_FMT: tl.constexpr, B_FMT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Persistent ragged grouped scaled GEMM; the layouts are in the module docstring."""
    A_PACK: tl.constexpr = 2 if A_FMT == "e2m1" else 1
    B_PACK: tl.constexpr = 2 if B_FMT == "e2m1" else 1
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    if RAGGED == 1:
        groups = G + 1  # + the "tail group": rows past offs[-1], zero-filled
    else:
        groups = G
    done = pid * 0  # tiles in the groups before g (an i32 scalar: it is loop-carried)
    for g in range(0, groups):
        start = tl.load(offs_ptr + g - 1, mask=g > 0, other=0)
        live = g < G  # False only for the tail group
        gi = tl.minimum(g, G - 1)  # the tail group reads no group data
        m_size = M
        k_size = K
        a_base = a_ptr
        b_base = b_ptr + gi * stride_bg
        sa_base = sa_ptr
        sb_base = sb_ptr + gi * stride_sbg
        c_base = c_ptr
        if RAGGED == 1:
            end = tl.load(offs_ptr + g, mask=live, other=M)
            m_size = end - start
            k_size = tl.where(live, K, 0)
            a_base += start * stride_am
            sa_base += start * stride_sam
            c_base += start * stride_cm
        else:
            start = tl.multiple_of(start, 32)  # checked by the op (NOTE [K masks])
            end = tl.load(offs_ptr + g)
            k_size = end - start
            a_base += (start // A_PACK) * stride_ak
            b_base += (start // B_PACK) * stride_bk
            sa_base += (start // 32) * stride_sak
            sb_base += (start // 32) * stride_sbk
            c_base += gi * stride_cg
        num_m = tl.cdiv(m_size, BLOCK_M)
        num_n = tl.cdiv(N, BLOCK_N)
        tiles = num_m * num_n
        # this program's first tile in the group: the t >= 0 with (done + t) % programs == pid
        first = (pid + programs - done % programs) % programs
        for t in range(first, tiles, programs):
            pid_m, pid_n = _tile_coords(t, num_m, num_n, GROUP_M)
            acc = _scaled_tile(a_base, b_base, sa_base, sb_base, m_size, N, k_size, pid_m, pid_n,
                               stride_am, stride_ak, stride_bk, stride_bn,
                               stride_sam, stride_sak, stride_sbn, stride_sbk,
                               MX, A_FMT, B_FMT, RAGGED == 3, BLOCK_M, BLOCK_N, BLOCK_K)
            _scaled_epilogue(acc, c_base, sa_base, sb_base, c_ptr, m_size, N, pid_m, pid_n,
                             stride_cm, stride_cn, stride_sam, stride_sbn, 0, live,
                             MX, False, BLOCK_M, BLOCK_N)
        done += tiles
