"""Which group and tile a workgroup computes, and the bounded operand views it reads.

Shared by the gfx950 and gfx1250 templates; called at trace time inside their kernels.

NOTE [group views]: a workgroup sees its group through views whose base is the group's
first element and whose buffer size ends where the group ends. Loads past the end read 0
and stores past it are dropped, so a tile never reads or writes across a group boundary
(proved for every shipped config in tests/rocm/test_layout_proofs.py, which runs
``ragged_m_tiles`` — the host-side twin of the kernel's scan — against random ``offs``).

Templates (``mode``): ``gemm``; ``2Dx3D`` (ragged M: rows offs[g-1]:offs[g] use B[g]);
``2Dx2D`` (ragged K: out[g] = A[:, Kg] @ B[Kg, :]); ``3Dx3D`` (batched).
"""

from __future__ import annotations

MODES = ("gemm", "2Dx3D", "2Dx2D", "3Dx3D")


def grid_size(mode: str, M: int, N: int, G: int, block_m: int, block_n: int) -> int:
    """Workgroups of one launch (an upper bound for ragged M: each group may add a tile)."""
    tm, tn = -(-M // block_m), -(-N // block_n)
    if mode == "gemm":
        return tm * tn
    if mode == "2Dx3D":
        return (tm + G) * tn
    return G * tm * tn


def ragged_m_tiles(offs: list[int], block_m: int) -> list[tuple[int, int, int]]:
    """(group, first row, end row) of each row tile, in the kernel's order (host twin).

    Group g has ceil(rows_g / block_m) tiles; tile t of the launch belongs to the group whose
    cumulative tile range holds t, and starts at ``offs[g-1] + (t - before) * block_m``.
    """
    tiles, start = [], 0
    for g, end in enumerate(offs):
        n = -(-(end - start) // block_m)
        tiles += [(g, start + i * block_m, end) for i in range(n)]
        start = end
    return tiles


def operand_views(fx, mode, A, B, C, Bias, g, row0, rows, k0, kn, N, lda, ldb, ldc,
                  sag, sbg, scg, sbiasg, a_k_major: bool, b_k_major: bool, has_bias: bool,
                  tdm: bool = False):
    """Bounded views (A (rows, kn), B (N, kn), C (rows, ldc), bias) of one group.

    ``tdm``: A and B are plain views (the Tensor Data Mover takes a raw address and bounds
    each tile by the view's shape); otherwise all four are buffer views bounded by size.
    """
    Int64 = fx.Int64

    def bounded(t, offset, shape, stride, n_elems, operand=False):
        view = fx.make_view(fx.add_offset(fx.get_iter(t), offset), fx.make_layout(shape, stride))
        if tdm and operand:
            return view
        nbytes = Int64(n_elems) * (t.element_type.width // 8)
        return fx.rocdl.make_buffer_tensor(view, num_records_bytes=nbytes)

    if a_k_major:
        gA = bounded(A, g * sag + row0 * lda + k0, (rows, kn), (lda, 1), rows * lda, True)
    else:
        gA = bounded(A, g * sag + k0 * lda + row0, (rows, kn), (1, lda), kn * lda, True)
    if b_k_major:
        gB = bounded(B, g * sbg + k0, (N, kn), (ldb, 1), N * ldb, True)
    else:
        gB = bounded(B, g * sbg + k0 * ldb, (N, kn), (1, ldb), kn * ldb, True)
    gC = bounded(C, g * scg + row0 * ldc, (rows, ldc), (ldc, 1), rows * ldc)
    gBias = bounded(Bias, g * sbiasg, (rows, ldc), (0, 1), N) if has_bias else None
    return gA, gB, gC, gBias
